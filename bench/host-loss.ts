/**
 * npm run bench:host-loss — the time the host monitor takes to move the services of a lost host, on an
 * embedded PostgreSQL of its own: N live services on a host whose heartbeat is a minute old, two live hosts with room,
 * one monitor pass timed from its start until every service moved (each move is its own transaction: capacity lock,
 * update, service_moves row, service.moved event, NOTIFY). Detection adds at most HOST_DOWN_AFTER_SECONDS plus one
 * heartbeat interval before the pass; the new host's life-cycle worker starts AutoDJ and relays within a pass after.
 * Options: --services <n,...> (50,500).
 */
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { beatStreamingHost, HostMonitor } from '../src/hosts/index.js';
import type { Logger } from '../src/log/index.js';
import { Database, migrate, startEmbeddedPostgres } from '../src/store/index.js';
import { scratchDir } from '../test/support/service.js';
import { copyTemplateCluster } from '../test/support/template-data-dir.js';

const { values: args } = parseArgs({ options: { services: { type: 'string', default: '50,500' } } });
const quiet: Logger = { info() {}, warn() {}, error() {} };
const LIVE_HOSTS = ['pool-a', 'pool-b'];

async function seed(db: Database, services: number): Promise<void> {
  for (const table of ['service_moves', 'service_events', 'service_holdings', 'services'])
    await db.query(`DELETE FROM ${table}`);
  await db.query('DELETE FROM streaming_hosts');
  await db.query(
    `INSERT INTO streaming_hosts (id, public_url, max_sources, max_listeners, heartbeat_at)
     SELECT id, 'http://' || id || '.example:8000', 1000, 100000,
            CASE WHEN id = 'lost' THEN now() - interval '1 minute' ELSE now() END
       FROM unnest($1::text[]) AS id`,
    [['lost', ...LIVE_HOSTS]],
  );
  await db.transaction(async (client) => {
    await client.query('SET LOCAL session_replication_role = replica'); // no orders or keys behind them
    await client.query(
      `INSERT INTO services (id, order_id, api_key_id, product_id, status, mount, source_user, source_password, limits,
                             expires_at, host_id)
       SELECT 'svc_' || i, 'ord_' || i, 'key_bench', 'event-stream', 'active', '/live-' || i, 'source', md5(i::text),
              '{"max_listeners": 50, "bitrate_kbps": 128}', now() + interval '3 hours', 'lost'
         FROM generate_series(1, $1) AS i`,
      [services],
    );
  });
  await db.query(
    `INSERT INTO service_holdings (scope, holder, services, listener_places)
     SELECT 'host', host_id, count(*), sum(listener_places(limits)) FROM services GROUP BY host_id`,
  );
}

async function timeMoves(db: Database, services: number): Promise<{ ms: number; moved: number }> {
  await seed(db, services);
  const monitor = new HostMonitor(db, quiet, { downAfterSeconds: 1, intervalMs: 1000 });
  await monitor.pass(); // the monitor marks hosts down only once it has reached PostgreSQL for the bound
  await sleep(1100);
  for (const id of LIVE_HOSTS) await beatStreamingHost(db, id);
  const began = performance.now();
  const pass = await monitor.pass();
  const ms = performance.now() - began;
  if (!pass?.markedDown.includes('lost')) throw new Error('the lost host was not marked down');
  return { ms, moved: pass.moved.length };
}

const dataDir = await scratchDir('bench-host-loss-');
await copyTemplateCluster(dataDir, 'bare');
const pg = await startEmbeddedPostgres(dataDir);
const db = new Database(pg.url);
try {
  await migrate(db);
  await timeMoves(db, 10); // warm-up: prepared statements, caches
  console.log('| services on the lost host | moved in one pass | pass ms | ms per service |\n|--:|--:|--:|--:|');
  for (const n of args.services.split(',').map(Number)) {
    const { ms, moved } = await timeMoves(db, n);
    console.log(`| ${n} | ${moved} | ${Math.round(ms)} | ${(ms / Math.max(1, moved)).toFixed(2)} |`);
  }
} finally {
  await db.close();
  await pg.stop();
}
