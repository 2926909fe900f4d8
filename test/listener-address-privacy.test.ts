import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { buyInstantStream } from './support/live-stream.js';
import { request, type Service, startService } from './support/service.js';
import { startFfmpegSource, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { connectDatabase } from './support/serve-lock.js';

// The statistics keep a listener's network (/24 or /48) and never its address: a listener connecting from an
// address of its own (127.0.0.77, a loopback address no other row names) is looked for in every text column of
// the database, while it listens and after it left.
requireStreamingTools(['icecast2', 'ffmpeg']);
const ADDRESS = '127.0.0.77';

let service: Service;
let encoder: ChildProcess | undefined;
let db: pg.Client;

before(async () => {
  service = await startService();
  db = await connectDatabase(service);
});
after(async () => {
  await db?.end();
  encoder?.kill('SIGKILL');
  await service?.stop();
});

/** A listener reading the stream from `ADDRESS`; resolves once it receives audio. */
function listenerFrom(streamUrl: string): Promise<{ received: () => number; close: () => void }> {
  const url = new URL(streamUrl);
  return new Promise((resolve, reject) => {
    let received = 0;
    const socket = net.connect({ host: url.hostname, port: Number(url.port), localAddress: ADDRESS });
    socket.on('data', (chunk: Buffer) => {
      received += chunk.length;
    });
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.write(`GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nUser-Agent: privacy-check/1\r\n\r\n`);
      resolve({ received: () => received, close: () => socket.destroy() });
    });
  });
}

/** Every text, JSON and address column of every table that holds `needle`, as table.column. */
async function columnsHolding(needle: string): Promise<string[]> {
  const { rows } = await db.query<{ table_name: string; column_name: string }>(
    `SELECT c.table_name, c.column_name FROM information_schema.columns c
     JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
     WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'
       AND c.data_type IN ('text', 'character varying', 'jsonb', 'json', 'inet', 'cidr', 'ARRAY')`,
  );
  const found: string[] = [];
  for (const { table_name, column_name } of rows) {
    const column = `${pg.escapeIdentifier(table_name)}.${pg.escapeIdentifier(column_name)}`;
    const hit = await db.query(
      `SELECT 1 FROM ${pg.escapeIdentifier(table_name)} WHERE ${column}::text LIKE $1 LIMIT 1`,
      [`%${needle}%`],
    );
    if (hit.rowCount) found.push(`${table_name}.${column_name}`);
  }
  return found;
}

describe("a listener's address", () => {
  test('is kept as its network only, while it listens and after', { timeout: 120_000 }, async () => {
    const svc = await buyInstantStream(service, 'Private FM', {
      duration_hours: 1,
      max_listeners: 5,
      bitrate_kbps: 64,
    });
    encoder = startFfmpegSource(svc.broadcast_url);
    const onAir = async () =>
      (await request(service, 'GET', `/listen/${svc.service_id}/now-playing`)).body.listen?.on_air;
    await waitFor('the source on air', onAir, 40_000);
    const listener = await listenerFrom(svc.stream_url);
    await waitFor('the listener to receive audio', () => listener.received() > 20_000, 30_000);
    // Places are written to PostgreSQL behind the admissions, in batches: the listing shows the session shortly after.
    const listed = async () => {
      const current = (await request(service, 'GET', `/services/${svc.service_id}/listeners`)).body.current;
      const mine = current.filter((s: { user_agent: string }) => s.user_agent === 'privacy-check/1');
      return mine.length ? mine : undefined;
    };
    const mine = await waitFor('the session listed', listed, 15_000);
    assert.equal(mine.length, 1, JSON.stringify(mine));
    assert.equal(mine[0].client_network, '127.0.0.0/24', 'the session has its network');
    assert.deepEqual(await columnsHolding(ADDRESS), [], 'no column holds the address while it listens');

    listener.close();
    await waitFor(
      'the session closed with its bytes',
      async () => {
        const page = (await request(service, 'GET', `/services/${svc.service_id}/listeners?limit=50`)).body;
        return page.recent.some(
          (s: { user_agent: string; bytes: number | null }) => s.user_agent === 'privacy-check/1' && s.bytes,
        );
      },
      60_000,
    );
    assert.deepEqual(await columnsHolding(ADDRESS), [], 'nor after it left');
  });
});
