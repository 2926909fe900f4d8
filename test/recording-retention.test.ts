import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { access, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { PaymentRequired } from '@x402/core/types';
import pg from 'pg';
import Parser from 'rss-parser';
import { createApiKey } from './support/api-key.js';
import { buy, payFor } from './support/purchase.js';
import { copyCatalog, request, type Service, startService } from './support/service.js';
import { exitOf, listenWhenLive, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { liveToneSource } from './support/tones.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';
import { claimWaitsForServiceRow } from './support/row-lock.js';

// Recordings kept past their service (the audio-storage-api product): three services each record one live show; the
// owner buys retention for the first one's on chain, the second's is left to end with its service, and the third's is
// deleted while a paid retention for it waits for the service's row. After the stops, the kept show still downloads
// and is in the podcast feed, the other is gone; once kept_until passes, the kept one is deleted too (file and row).
requireStreamingTools(['icecast2', 'ffmpeg']);
const GIB = 1024 ** 3;
// No source comes back here, so a show may end 3 s after its source rather than production's minute; the deletions
// are looked for every second rather than every minute. The waits for them are bounded well below that minute, so
// that a service ignoring the settings fails them (always the show's end; most of the time the deletions).
const RECORDING = { RECORDING_GAP_SECONDS: '3', RECORDING_CLEANUP_INTERVAL_SECONDS: '1' };
const SHOW_END_MS = 45_000;
const DELETION_MS = 20_000;

let service: Service;
let catalog: Awaited<ReturnType<typeof copyCatalog>>;
let wallet: TestWallet;
let db: pg.Client;
const sources: ChildProcess[] = [];
/** kept: retention bought; ended: none; raced: deleted while its retention is being paid. */
const svcs: Record<'kept' | 'ended' | 'raced', any> = { kept: undefined, ended: undefined, raced: undefined };
const shows: Record<string, any> = {};

const owner = (svc: any, method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  request(service, method, `/services/${svc.service_id}${path}`, { body, headers });
const retentionPath = (svc: any) => `/services/${svc.service_id}/recordings/retention`;

function toneSource(url: string, seconds: number): ChildProcess {
  const child = liveToneSource(url, seconds);
  sources.push(child);
  return child;
}

async function recordShow(svc: any): Promise<any> {
  const source = toneSource(svc.broadcast_url, 5);
  (await listenWhenLive(svc.stream_url, 30_000)).close();
  assert.equal(await exitOf(source, 40_000), 0, 'the source sent its tone');
  return waitFor(
    'the show to end 3 s after its source',
    async () => {
      const items = (await owner(svc, 'GET', '/recordings')).body.recordings;
      return items.length === 1 && items[0].status === 'complete' && items[0];
    },
    SHOW_END_MS,
  );
}

/** The price by the catalog's numbers, computed here: base + ceil(bytes / GiB) x days x the GB-day rate. */
async function expectedAtomic(bytes: number, days: number): Promise<bigint> {
  const product = await readFile(join(catalog.catalogDir, 'products', 'audio-storage-api.yaml'), 'utf8');
  const base = BigInt(/base_atomic: "(\d+)"/.exec(product)![1]);
  const rate = BigInt(/per_gb_day_atomic: "(\d+)"/.exec(product)![1]);
  const gb = BigInt(Math.max(1, Math.ceil(bytes / GIB)));
  return base + gb * BigInt(days) * rate;
}

before(async () => {
  catalog = await copyCatalog();
  service = await startService({ ...RECORDING, CATALOG_DIR: catalog.catalogDir, RULES_DIR: catalog.rulesDir });
  const dev = await devFile(service.dataDir);
  wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const lock = JSON.parse(await readFile(join(service.dataDir, 'serve.lock'), 'utf8'));
  db = new pg.Client({ connectionString: lock.database_url });
  await db.connect();
  for (const name of Object.keys(svcs) as Array<keyof typeof svcs>) {
    const bought = await buy(service, wallet, {
      product_id: 'instant-stream',
      email: 'owner@example.com',
      station_name: `Station ${name}`,
      parameters: { duration_hours: 1, max_listeners: 5, bitrate_kbps: 64, recording: true },
    });
    assert.equal(bought.status, 200, JSON.stringify(bought.body));
    svcs[name] = bought.body.service;
  }
  const recorded = await Promise.all(Object.values(svcs).map((svc) => recordShow(svc)));
  for (const [i, name] of Object.keys(svcs).entries()) shows[name] = recorded[i];
});

after(async () => {
  for (const source of sources) source.kill('SIGKILL');
  await db?.end();
  await service?.stop();
  await catalog?.remove();
});

describe('recordings kept past their service (audio-storage-api)', { timeout: 600_000 }, () => {
  test('the product is orderable for agents in USDC, but only per service: POST /orders refuses it', async () => {
    const product = await request(service, 'GET', '/products/audio-storage-api');
    assert.equal(product.status, 200, JSON.stringify(product.body));
    const p = product.body.product ?? product.body;
    assert.equal(p.status, 'available');
    assert.equal(p.pricing.currency, 'USDC');
    const ordered = await request(service, 'POST', '/orders', {
      body: {
        product_id: 'audio-storage-api',
        email: 'a@example.com',
        station_name: 'x',
        parameters: { storage_gb: 1, retention_days: 30, gb_days: 30 },
      },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.equal(ordered.status, 409, JSON.stringify(ordered.body));
    assert.equal(ordered.body.error.code, 'product_not_orderable');
    assert.match(ordered.body.error.message, /recordings\/retention/);
    assert.equal(ordered.headers.get('payment-required'), null);
  });

  test('a stranger cannot buy retention for someone else’s service; bad days are refused before payment', async () => {
    const other = await createApiKey(service, 'stranger');
    const stranger = await request({ ...service, apiKey: other.api_key }, 'POST', retentionPath(svcs.kept), {
      body: { retention_days: 30 },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.equal(stranger.status, 404, JSON.stringify(stranger.body));
    assert.equal(stranger.body.error.code, 'service_not_found');
    for (const days of [0, 366]) {
      const refused = await owner(
        svcs.kept,
        'POST',
        '/recordings/retention',
        { retention_days: days },
        {
          'idempotency-key': randomUUID(),
        },
      );
      assert.equal(refused.status, 422, JSON.stringify(refused.body));
      assert.equal(refused.body.error.details[0].pointer, '/retention_days');
    }
  });

  test('retention is priced by the rules, paid on chain and kept until the service end + days; again adds days', async () => {
    const days = 200;
    const unpaid = await owner(
      svcs.kept,
      'POST',
      '/recordings/retention',
      { retention_days: days },
      {
        'idempotency-key': randomUUID(),
      },
    );
    assert.equal(unpaid.status, 402, JSON.stringify(unpaid.body));
    const offered = decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!).accepts[0];
    const expected = await expectedAtomic(shows.kept.size_bytes, days);
    assert.equal(expected, 270000n + 1n * 200n * 2000n, 'a show of a few kB is 1 GB');
    assert.equal(offered.amount, expected.toString());
    const { asset, payTo } = offered;
    const sellerBefore = await wallet.balanceOf(asset, payTo);

    const paid = await payFor(service, wallet, retentionPath(svcs.kept), { retention_days: days });
    assert.equal(paid.status, 200, JSON.stringify(paid.body));
    const order = paid.body.order;
    assert.equal(order.product_id, 'audio-storage-api');
    assert.equal(order.amount.amount_atomic, expected.toString());
    assert.deepEqual(order.configuration.recording_ids, [shows.kept.recording_id]);
    assert.equal(order.configuration.storage_bytes, shows.kept.size_bytes);
    assert.equal(order.configuration.storage_gb, 1);
    assert.equal(await wallet.balanceOf(asset, payTo), sellerBefore + expected, 'the transfer is on chain');
    const keptUntil = new Date(svcs.kept.expires_at).getTime() + days * 86_400_000;
    assert.equal(paid.body.recordings[0].kept_until, new Date(keptUntil).toISOString());

    const replay = await service.cli(['audit', 'replay', order.evaluation_id]);
    assert.equal(replay.code, 0, replay.stdout + replay.stderr);
    const preview = await service.cli([
      'catalog',
      'preview',
      'audio-storage-api',
      '--param',
      'storage_gb=1',
      '--param',
      `retention_days=${days}`,
      '--param',
      `gb_days=${days}`,
    ]);
    assert.match(preview.stdout, new RegExp(`\\(${expected} atomic units`), preview.stdout + preview.stderr);

    // Ten days more over MCP: the same operation, paid with _meta["x402/payment"].
    const agent = new Client({ name: 'retention-test', version: '1.0.0' });
    const headers = { authorization: `Bearer ${service.apiKey}` };
    await agent.connect(
      new StreamableHTTPClientTransport(new URL(`${service.baseUrl}/mcp`), { requestInit: { headers } }),
    );
    try {
      const args = { service_id: svcs.kept.service_id, retention_days: 10, idempotency_key: randomUUID() };
      const unpaidTool: any = await agent.callTool({ name: 'retain_recordings', arguments: args });
      const required = unpaidTool.structuredContent as PaymentRequired;
      assert.equal(required.accepts[0].amount, (await expectedAtomic(shows.kept.size_bytes, 10)).toString());
      const paidTool: any = await agent.callTool({
        name: 'retain_recordings',
        arguments: args,
        _meta: { 'x402/payment': await wallet.client.createPaymentPayload(required) },
      });
      assert.equal(paidTool.isError, undefined, JSON.stringify(paidTool));
      assert.equal(paidTool.structuredContent.order.product_id, 'audio-storage-api');
    } finally {
      await agent.close();
    }
    const listed = (await owner(svcs.kept, 'GET', '/recordings')).body.recordings;
    assert.equal(listed[0].kept_until, new Date(keptUntil + 10 * 86_400_000).toISOString(), 'the days add up');
  });

  test('a recording deleted while its paid retention waits for the service is refused at claim: nothing charged', async () => {
    const key = randomUUID();
    const body = { retention_days: 30, recording_ids: [shows.raced.recording_id] };
    const unpaid = await owner(svcs.raced, 'POST', '/recordings/retention', body, { 'idempotency-key': key });
    assert.equal(unpaid.status, 402, JSON.stringify(unpaid.body));
    const header = unpaid.headers.get('payment-required')!;
    const { asset, payTo } = decodePaymentRequiredHeader(header).accepts[0];
    const signature = await wallet.pay(header);
    const sellerBefore = await wallet.balanceOf(asset, payTo);
    const lock = JSON.parse(await readFile(join(service.dataDir, 'serve.lock'), 'utf8'));
    const deleter = new pg.Client({ connectionString: lock.database_url });
    await deleter.connect();
    try {
      // The owner's deletion holds the service row while the paid request is priced (the recording still there) and
      // claimed: the claim waits for the row, then finds the recording gone.
      await deleter.query('BEGIN');
      await deleter.query('SELECT 1 FROM services WHERE id = $1 FOR UPDATE', [svcs.raced.service_id]);
      await deleter.query('DELETE FROM recordings WHERE id = $1', [shows.raced.recording_id]);
      const pending = owner(svcs.raced, 'POST', '/recordings/retention', body, {
        'idempotency-key': key,
        'payment-signature': signature,
      });
      await claimWaitsForServiceRow(db, 20_000);
      await deleter.query('COMMIT');
      const paid = await pending;
      assert.equal(paid.status, 409, JSON.stringify(paid.body));
      assert.equal(paid.body.error.code, 'recording_gone');
    } finally {
      await deleter.end();
    }
    assert.equal(await wallet.balanceOf(asset, payTo), sellerBefore, 'nothing charged');
    const orders = await db.query('SELECT id FROM orders WHERE retention_of = $1', [svcs.raced.service_id]);
    assert.equal(orders.rows.length, 0, 'no order was claimed');
  });

  test('after the stops the kept show downloads and is in the feed; the other is gone; kept_until past: gone too', {
    timeout: 300_000,
  }, async () => {
    const endedFile = await fileOf(shows.ended.recording_id);
    const keptFile = await fileOf(shows.kept.recording_id);
    for (const svc of [svcs.kept, svcs.ended]) {
      const stopped = await owner(svc, 'POST', '/stop');
      assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    }
    await waitFor(
      'the recording without retention deleted with its service',
      async () => (await owner(svcs.ended, 'GET', '/recordings')).body.recordings.length === 0,
      DELETION_MS,
    );
    assert.equal((await fetch(shows.ended.download_url)).status, 404);
    await assert.rejects(access(endedFile), 'its file is gone');

    const kept = (await owner(svcs.kept, 'GET', '/recordings')).body.recordings;
    assert.equal(kept.length, 1, 'the kept one is still listed after the same pass');
    const download = await fetch(kept[0].download_url);
    assert.equal(download.status, 200);
    assert.equal((await download.arrayBuffer()).byteLength, shows.kept.size_bytes);
    const feed: any = await new Parser().parseString(await (await fetch(svcs.kept.endpoints.podcast_feed)).text());
    assert.deepEqual(
      feed.items.map((i: any) => i.guid),
      [shows.kept.recording_id],
    );

    await access(keptFile);
    await db.query("UPDATE recordings SET kept_until = now() - interval '1 second' WHERE id = $1", [
      shows.kept.recording_id,
    ]);
    await waitFor(
      'the kept recording deleted once kept_until passed',
      async () => (await owner(svcs.kept, 'GET', '/recordings')).body.recordings.length === 0,
      DELETION_MS,
    );
    await assert.rejects(access(keptFile), 'its file is gone');
  });
});

/** Where a recording's audio is on the media storage. */
async function fileOf(recordingId: string): Promise<string> {
  const { rows } = await db.query('SELECT service_id, file_name FROM recordings WHERE id = $1', [recordingId]);
  const path = join(service.dataDir, 'media', rows[0].service_id, rows[0].file_name);
  await access(path);
  return path;
}
