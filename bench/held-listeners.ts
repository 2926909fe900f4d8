// What serve does while listeners are held and nothing changes (npx tsx bench/held-listeners.ts): a host in HAProxy
// mode with S instant-streams of P places at 32 kbps (raw source clients in a child process), S × P listeners held by
// raw clients in child processes of their own; over the hold: CPU of serve, HAProxy, Icecast and PostgreSQL from
// /proc, PostgreSQL's transactions and row writes per second, and (HELD_PROFILE=1) where serve's own CPU goes, from
// a V8 CPU profile cut to the hold. With HELD_ANCHOR=1 (default), Icecast alone carrying the same listeners first.
// Env: HELD_STREAMS (10), HELD_PLACES (30), HELD_SECONDS (30), HELD_PROFILE (0), HELD_ANCHOR (1).
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { buy } from '../test/support/purchase.js';
import { roomyCatalog, startService, type Service } from '../test/support/service.js';
import { TestWallet } from '../test/support/wallet.js';
import { measureAnchor } from './capacity-planes.js';
import { formatSummary, summarizeFile } from './cpu-profile-summary.js';
import { ListenerFleet } from './listener-fleet.js';
import { coresOver } from './listener-hold.js';
import { startMp3Sources } from './mp3-sources.js';
import { pool } from './pool.js';
import { namedTreesCpu, treeCpu } from './process-cpu.js';
import { drain, waitLive } from './streaming.js';

const env = (name: string, fallback: number) => Number(process.env[`HELD_${name}`] ?? fallback);
const streams = env('STREAMS', 10);
const places = env('PLACES', 30);
const holdSeconds = env('SECONDS', 30);
const profile = env('PROFILE', 0) === 1;
const anchor = env('ANCHOR', 1) === 1;
const KBPS = 32;
const root = fileURLToPath(new URL('../', import.meta.url));
const signal = AbortSignal.timeout(30 * 60_000);

const fmt = (n: number) => n.toFixed(1);

async function cpuOf(pid: number): Promise<Record<string, number>> {
  const serve = (await treeCpu(pid))?.self ?? Number.NaN;
  const proxy = (await namedTreesCpu(pid, ['haproxy'])) ?? 0;
  const icecast = (await namedTreesCpu(pid, ['icecast2'])) ?? Number.NaN;
  const postgres = (await namedTreesCpu(pid, ['postgres'])) ?? Number.NaN;
  return { serve, proxy, icecast, postgres, host: serve + proxy + icecast + postgres };
}

/** PostgreSQL's committed transactions and row writes per table, since it started. */
async function pgCounters(client: pg.Client): Promise<{ xacts: number; writes: Map<string, number> }> {
  const {
    rows: [db],
  } = await client.query(
    'SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()',
  );
  const { rows } = await client.query<{ relname: string; n: string }>(
    'SELECT relname, n_tup_ins + n_tup_upd + n_tup_del AS n FROM pg_stat_user_tables',
  );
  return { xacts: Number(db.n), writes: new Map(rows.map((r) => [r.relname, Number(r.n)])) };
}

async function buyStreams(service: Service): Promise<{ listen: string[]; broadcast: string[] }> {
  const dev = JSON.parse(await readFile(join(service.dataDir, 'dev.json'), 'utf8'));
  const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const bought = await pool(
    Array.from({ length: streams }, (_, i) => i),
    4,
    async () => {
      const r = await buy(service, wallet, {
        product_id: 'instant-stream',
        email: 'bench@example.com',
        station_name: 'Bench',
        parameters: { duration_hours: 1, max_listeners: places, bitrate_kbps: KBPS },
      });
      if (r.status !== 200) throw new Error(`buying answered ${r.status}: ${JSON.stringify(r.body)}`);
      return r.body.service as { broadcast_url: string; stream_url: string };
    },
  );
  return { listen: bought.map((b) => b.stream_url), broadcast: bought.map((b) => b.broadcast_url) };
}

/** Counters (monotonic µs) bracketing a hold: PostgreSQL's, the processes' CPU, and the clock of the samples. */
async function hold(service: Service, db: pg.Client) {
  const pid = service.process.pid!;
  const [pg0, cpu0, t0, at0] = [await pgCounters(db), await cpuOf(pid), performance.now(), process.hrtime.bigint()];
  await sleep(holdSeconds * 1000);
  const [pg1, cpu1, t1, at1] = [await pgCounters(db), await cpuOf(pid), performance.now(), process.hrtime.bigint()];
  const seconds = (t1 - t0) / 1000;
  const cores = Object.fromEntries(Object.keys(cpu1).map((k) => [k, ((cpu1[k] - cpu0[k]) / seconds) * 100]));
  const writes = [...pg1.writes]
    .map(([table, n]) => [table, (n - (pg0.writes.get(table) ?? 0)) / seconds] as const)
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1]);
  return {
    seconds,
    cores,
    xactsPerSecond: (pg1.xacts - pg0.xacts) / seconds,
    writes,
    window: [Number(at0 / 1000n), Number(at1 / 1000n)] as const,
  };
}

async function host(fleet: ListenerFleet, profileDir?: string) {
  if (profileDir) process.env.TEST_NODE_FLAGS = `--cpu-prof --cpu-prof-dir=${profileDir}`;
  const service = await startService({
    ICECAST_PROXY: 'haproxy',
    RATE_LIMIT_PER_IP: '0',
    RATE_LIMIT_PER_KEY: '0',
    ICECAST_MAX_SOURCES: String(streams + 10),
    ICECAST_MAX_LISTENERS: String(streams * places + 500),
    ...(await roomyCatalog()),
  });
  const db = new pg.Client(JSON.parse(await readFile(join(service.dataDir, 'serve.lock'), 'utf8')).database_url);
  await db.connect();
  try {
    const origin = new URL(service.metricsUrl).origin;
    const bought = await buyStreams(service);
    const sources = await startMp3Sources(root, bought.broadcast, KBPS);
    try {
      await Promise.all(bought.listen.map((u) => waitLive(u, signal)));
      await sleep(3000);
      await drain(origin, signal);
      const idle = (await coresOver(() => cpuOf(service.process.pid!), 10)).cores;
      const opened = await fleet.open(bought.listen.flatMap((u) => Array(places).fill(u)));
      const admitted = opened.answers.filter((a) => a.status === 200).length;
      await sleep(5000);
      await drain(origin, signal);
      const held = await hold(service, db);
      await fleet.closeAll();
      return { idle, admitted, held };
    } finally {
      await sources.stop();
    }
  } finally {
    await db.end();
    await service.stop();
    delete process.env.TEST_NODE_FLAGS;
  }
}

const listeners = streams * places;
const fleet = await ListenerFleet.start(root, listeners);
try {
  const shape = { root, streams, places, kbps: KBPS, holdSeconds, fleet, signal };
  const alone = anchor ? await measureAnchor(shape) : undefined;
  const profileDir = profile ? await mkdtemp(join(tmpdir(), 'held-profile-')) : undefined;
  const { idle, admitted, held } = await host(fleet, profileDir);
  const c = held.cores;
  const icecastAlone = alone?.held.cores.icecast;
  console.log(
    `load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  console.log(
    `${streams} streams × ${places} places at ${KBPS} kbps, ${admitted} admitted, held ${fmt(held.seconds)} s`,
  );
  console.log(`idle with sources (% of a core): serve ${fmt(idle.serve)}, postgres ${fmt(idle.postgres)}`);
  console.log(
    `held (% of a core): serve ${fmt(c.serve)}, haproxy ${fmt(c.proxy)}, icecast ${fmt(c.icecast)}, ` +
      `postgres ${fmt(c.postgres)}, host ${fmt(c.host)}; serve ${(c.serve / c.icecast).toFixed(2)}× icecast` +
      (icecastAlone ? `; icecast alone ${fmt(icecastAlone)}, host ${(c.host / icecastAlone).toFixed(2)}× it` : ''),
  );
  console.log(`postgres: ${fmt(held.xactsPerSecond)} transactions/s; rows written/s by table:`);
  for (const [table, n] of held.writes) console.log(`  ${table} ${fmt(n)}`);
  if (profileDir) {
    const [file] = (await readdir(profileDir)).filter((f) => f.endsWith('.cpuprofile'));
    if (file) console.log(formatSummary(await summarizeFile(join(profileDir, file), ...held.window, 40)));
    console.log(`profile: ${profileDir}`);
  }
} finally {
  await fleet.stop();
}
