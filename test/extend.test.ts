import assert from 'node:assert/strict';
import { type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { recordExpiringServices, type ExtendHint } from '../src/events/index.js';
import { buy, payFor } from './support/purchase.js';
import { createApiKey } from './support/api-key.js';
import { request, type Service } from './support/service.js';
import { expireIn } from './support/expiry.js';
import { shortLivedCatalog, startShortLivedService } from './support/short-catalog.js';
import { challengeOf, signedHeader } from './support/siwx.js';
import { openSse } from './support/sse.js';
import {
  exitOf,
  hasMpegFrame,
  listenWhenLive,
  startFfmpegSource,
  waitFor,
  within,
  type Listener,
} from './support/streaming.js';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, TestWallet } from './support/wallet.js';
import { requireStreamingTools } from './support/system-tools.js';
import { devFile } from './support/dev-file.js';
import { claimWaitsForServiceRow } from './support/row-lock.js';
import { connectDatabase } from './support/serve-lock.js';

requireStreamingTools();

/** The grace period after expiry in this test's catalog: 0.01 h = 36 s. */
const GRACE_MS = 36_000;

let service: Service;
let wallet: TestWallet;
let buyerKey: `0x${string}`;
let db: pg.Client;
let catalog: Awaited<ReturnType<typeof shortLivedCatalog>>;
const processes: ChildProcess[] = [];
const listeners: Listener[] = [];

/** A grace period of GRACE_MS, and the upgrade target dearer by the hour than the service it upgrades. */
async function graceAndDearerUpgrade(catalogDir: string): Promise<void> {
  const settings = join(catalogDir, 'catalog.yaml');
  await writeFile(settings, (await readFile(settings, 'utf8')).replace('grace_hours: 24', 'grace_hours: 0.01'));
  // The upgrade target dearer by the hour than the service it upgrades (0.10 vs 0.02 USDC/h): an extension priced at
  // the old product's rate must not end up as hours of the new one.
  const eventStream = join(catalogDir, 'products/event-stream.yaml');
  const dearer = (await readFile(eventStream, 'utf8')).replace('per_hour_atomic: "20000"', 'per_hour_atomic: "100000"');
  await writeFile(
    eventStream,
    dearer
      .replace('duration_hours x 0.02 USDC', 'duration_hours x 0.10 USDC')
      // At most 100 h, so that its dearest configuration stays within the order maximum.
      .replace(
        'duration_hours: { type: number, required: true, minimum: 1, maximum: 720 }',
        'duration_hours: { type: number, required: true, minimum: 1, maximum: 100 }',
      )
      .replace('duration_hours: { minimum: 1, maximum: 720 }', 'duration_hours: { minimum: 1, maximum: 100 }'),
  );
}

before(async () => {
  ({ catalog, service } = await startShortLivedService({}, graceAndDearerUpgrade));
  const dev = await devFile(service);
  buyerKey = dev.buyer.private_key;
  wallet = new TestWallet(buyerKey, dev.chain.rpc_url);
  db = await connectDatabase(service);
});
after(async () => {
  for (const l of listeners) l.close();
  for (const p of processes) p.kill('SIGKILL');
  await db?.end();
  await service?.stop();
  await catalog?.remove();
});

type Bought = { service_id: string; stream_url: string; broadcast_url: string; expires_at: string; status: string };

const stream = (hours: number): Promise<Bought> =>
  buy(service, wallet, {
    product_id: 'instant-stream',
    email: 'ext@example.com',
    station_name: 'Extend FM',
    parameters: { duration_hours: hours, max_listeners: 2, bitrate_kbps: 64 },
  }).then((r) => {
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.service as Bought;
  });

const extend = (id: string, hours: number, key = randomUUID()) =>
  payFor(service, wallet, `/services/${id}/extend`, { duration_hours: hours }, key);

function source(url: string): ChildProcess {
  const child = startFfmpegSource(url, 64);
  processes.push(child);
  return child;
}

async function listen(url: string): Promise<Listener> {
  const listener = await listenWhenLive(url);
  listeners.push(listener);
  return listener;
}

const statusOf = async (id: string) => (await request(service, 'GET', `/services/${id}`)).body.service.status as string;
const sleepUntil = (at: number) => new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));

describe('extending a service', () => {
  test('paid with x402 like an order: the expiry moves from the old one, the source and a listener connected before play past it, until the new expiry', {
    timeout: 120_000,
  }, async () => {
    // Bought for an hour, so that a slow start cannot outlast it; once on air its end is moved to 20 s from now: the
    // "old expiry" the extension is paid before and played past. The 402 and the paid request must both land before
    // it (on a loaded machine they took more than 8 s): once it has passed, the hours count from the payment.
    const bought = await stream(1);
    const events = await openSse(`${service.baseUrl}/services/${bought.service_id}/events`, {
      authorization: `Bearer ${service.apiKey}`,
    });
    const encoder = source(bought.broadcast_url);
    const listener = await listen(bought.stream_url);
    await waitFor('audio', () => hasMpegFrame(listener.received()), 10_000);
    const svc = { ...bought, expires_at: (await expireIn(service, bought.service_id, 20)).toISOString() };

    const key = randomUUID();
    const unpaid = await request(service, 'POST', `/services/${svc.service_id}/extend`, {
      body: { duration_hours: 0.003 },
      headers: { 'idempotency-key': key },
    });
    assert.equal(unpaid.status, 402, JSON.stringify(unpaid.body));
    assert.equal(unpaid.body.error.code, 'payment_required');
    const required = decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!);
    // 0.003 h at 0.02 USDC an hour is below the order minimum: the minimum is charged.
    assert.equal(required.accepts[0].amount, '270000');
    const { asset, payTo } = required.accepts[0];
    const sellerBefore = await wallet.balanceOf(asset, payTo);

    const paid = await extend(svc.service_id, 0.003, key);
    assert.equal(paid.status, 200, JSON.stringify(paid.body));
    assert.equal(decodePaymentResponseHeader(paid.headers.get('payment-response')!).success, true);
    assert.equal(paid.body.order.extension_of, svc.service_id);
    assert.deepEqual(paid.body.order.configuration, { duration_hours: 0.003 });
    assert.equal(paid.body.order.amount.amount, '0.27');
    assert.equal(
      Date.parse(paid.body.service.expires_at) - Date.parse(svc.expires_at),
      10_800,
      'old expiry + 0.003 h, not now + 0.003 h',
    );
    assert.equal(paid.body.service.limits.duration_hours, 1.003);
    assert.equal(paid.body.service.broadcast_url, svc.broadcast_url, 'same mount and credentials');
    assert.equal((await wallet.balanceOf(asset, payTo)) - sellerBefore, 270000n);

    // The same paid request again: the same answer, no second charge.
    const replay = await extend(svc.service_id, 0.003, key);
    assert.equal(replay.status, 200, JSON.stringify(replay.body));
    assert.equal(replay.body.idempotent_replay, true);
    assert.equal(replay.body.order.id, paid.body.order.id);
    assert.equal(replay.body.service.expires_at, paid.body.service.expires_at);
    assert.equal((await wallet.balanceOf(asset, payTo)) - sellerBefore, 270000n, 'charged once');
    const otherBody = await request(service, 'POST', `/services/${svc.service_id}/extend`, {
      body: { duration_hours: 1 },
      headers: { 'idempotency-key': key },
    });
    assert.equal(otherBody.status, 409);
    assert.equal(otherBody.body.error.code, 'idempotency_key_reused');

    // Past the old expiry: still streaming, the listener admitted before the extension still receives.
    await sleepUntil(Date.parse(svc.expires_at) + 3000);
    assert.equal(await statusOf(svc.service_id), 'active');
    assert.equal(encoder.exitCode, null, 'the source is still connected');
    const before = listener.received().length;
    await waitFor('more audio after the old expiry', () => listener.received().length > before + 4000, 5000);
    let cut = false;
    void listener.ended.then(() => {
      cut = true;
    });
    assert.equal(cut, false, 'the listener was not cut at the old expiry');
    const late = await listen(svc.stream_url);
    late.close();

    // At the new expiry the life-cycle worker cuts both. The extension stored its expiry; it is then moved nearer, as a
    // clock running faster would, rather than waited out.
    const stored = await db.query('SELECT expires_at FROM services WHERE id = $1', [svc.service_id]);
    assert.equal(stored.rows[0].expires_at.toISOString(), paid.body.service.expires_at);
    const newExpiry = (await expireIn(service, svc.service_id, 1)).getTime();
    assert.notEqual(await exitOf(encoder, newExpiry - Date.now() + 8000), null, 'the source is cut at the new expiry');
    await within(listener.ended, 8000, 'the listener was not cut at the new expiry');
    assert.ok(Date.now() >= newExpiry, 'not before the new expiry');
    assert.equal(await statusOf(svc.service_id), 'expired');

    events.close();
    const types = events.messages.map((m) => m.event);
    assert.ok(types.includes('service.extended'), types.join(', '));
    const extended = JSON.parse(events.messages.find((m) => m.event === 'service.extended')!.data);
    assert.equal(extended.data.added_hours, 0.003);
    assert.equal(extended.data.expires_at, paid.body.service.expires_at);
    const expiring = JSON.parse(events.messages.find((m) => m.event === 'service.expiring')!.data);
    assert.equal(expiring.data.extend.url, `${service.baseUrl}/services/${svc.service_id}/extend`);
    assert.equal(expiring.data.extend.mcp_tool, 'extend_service');
    assert.deepEqual(expiring.data.extend.price_for_1_hour, {
      amount: '0.27',
      amount_atomic: '270000',
      currency: 'USDC',
    });

    const audit = await service.cli(['audit', 'replay', paid.body.order.evaluation_id]);
    assert.equal(audit.code, 0, audit.stdout + audit.stderr);
    assert.match(audit.stdout, /"kind":"extension_price","identical":true/);
    const verify = await service.cli(['audit', 'verify']);
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);
  });

  test('an expired service extended within the grace period comes back on the same mount; after it, 409 and no charge', {
    timeout: 120_000,
  }, async () => {
    const svc = await stream(1);
    const gone = await stream(1);
    // Their ends moved as a clock running faster would: one ends now, the other ended longer ago than the grace period.
    await expireIn(service, svc.service_id, 0);
    await expireIn(service, gone.service_id, -(GRACE_MS + 500) / 1000);
    await waitFor('expiry', async () => (await statusOf(svc.service_id)) === 'expired', 15_000);
    const paidAt = Date.now();
    const back = await extend(svc.service_id, 0.003);
    assert.equal(back.status, 200, JSON.stringify(back.body));
    assert.equal(back.body.service.status, 'active');
    assert.equal(back.body.service.broadcast_url, svc.broadcast_url);
    assert.ok(Date.parse(back.body.service.expires_at) - paidAt >= 10_800, 'the hours bought, from its return');
    source(svc.broadcast_url);
    const listener = await listen(svc.stream_url);
    await waitFor('audio again', () => hasMpegFrame(listener.received()), 10_000);

    await waitFor('the other one to expire', async () => (await statusOf(gone.service_id)) === 'expired', 15_000);
    const late = await request(service, 'POST', `/services/${gone.service_id}/extend`, {
      body: { duration_hours: 1 },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.equal(late.status, 409, JSON.stringify(late.body));
    assert.equal(late.body.error.code, 'extension_grace_over');
    assert.equal(late.headers.get('payment-required'), null, 'refused before any payment is asked');
  });

  test("bounds: the product's maximum duration over the life of the service; a stopped service is refused before payment", async () => {
    const svc = await stream(1);
    const tooLong = await request(service, 'POST', `/services/${svc.service_id}/extend`, {
      body: { duration_hours: 699.5 },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.equal(tooLong.status, 409, JSON.stringify(tooLong.body));
    assert.equal(tooLong.body.error.code, 'extension_too_long');
    assert.match(tooLong.body.error.message, /at most 700 hours.*at most 699 hours/);
    const invalid = await request(service, 'POST', `/services/${svc.service_id}/extend`, {
      body: { duration_hours: 0 },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.equal(invalid.status, 422);

    await db.query('UPDATE services SET stopped_at = now() WHERE id = $1', [svc.service_id]);
    const stopped = await request(service, 'POST', `/services/${svc.service_id}/extend`, {
      body: { duration_hours: 1 },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.equal(stopped.status, 409, JSON.stringify(stopped.body));
    assert.equal(stopped.body.error.code, 'service_stopped');
    assert.match(stopped.body.error.message, /stopped and refunded/);
    assert.equal(stopped.headers.get('payment-required'), null);
  });

  test('a stop that lands between the 402 and the paid request is seen under the service lock: 409, not charged', async () => {
    const svc = await stream(1);
    const key = randomUUID();
    const unpaid = await request(service, 'POST', `/services/${svc.service_id}/extend`, {
      body: { duration_hours: 1 },
      headers: { 'idempotency-key': key },
    });
    const header = unpaid.headers.get('payment-required')!;
    const { asset, payTo } = decodePaymentRequiredHeader(header).accepts[0];
    const signature = await wallet.pay(header);
    const sellerBefore = await wallet.balanceOf(asset, payTo);
    // A stop holds the service row (uncommitted) while the paid extension arrives: the extension's claim waits for the
    // row, then sees the stop and refuses, before the payment is settled.
    const stopper = await connectDatabase(service);
    try {
      await stopper.query('BEGIN');
      await stopper.query('UPDATE services SET stopped_at = now() WHERE id = $1', [svc.service_id]);
      const pending = request(service, 'POST', `/services/${svc.service_id}/extend`, {
        body: { duration_hours: 1 },
        headers: { 'idempotency-key': key, 'payment-signature': signature },
      });
      await claimWaitsForServiceRow(db, 10_000);
      await stopper.query('COMMIT');
      const paid = await pending;
      assert.equal(paid.status, 409, JSON.stringify(paid.body));
      assert.equal(paid.body.error.code, 'service_stopped');
    } finally {
      await stopper.end();
    }
    assert.equal(await wallet.balanceOf(asset, payTo), sellerBefore, 'nothing charged');
  });

  test('another API key or another wallet gets 404 as for an unknown id; the paying wallet signed in extends with no key', {
    timeout: 60_000,
  }, async () => {
    const svc = await stream(1);
    const created = await createApiKey(service, 'stranger');
    const stranger = await request(
      { baseUrl: service.baseUrl, apiKey: created.api_key },
      'POST',
      `/services/${svc.service_id}/extend`,
      { body: { duration_hours: 1 }, headers: { 'idempotency-key': randomUUID() } },
    );
    assert.equal(stranger.status, 404);
    assert.equal(stranger.body.error.code, 'service_not_found');
    const unknown = await request(
      { baseUrl: service.baseUrl, apiKey: created.api_key },
      'POST',
      '/services/svc_doesnotexist/extend',
      { body: { duration_hours: 1 }, headers: { 'idempotency-key': randomUUID() } },
    );
    assert.deepEqual({ ...stranger.body.error, request_id: '' }, { ...unknown.body.error, request_id: '' });

    const path = `/services/${svc.service_id}/extend`;
    const body = { duration_hours: 1 };
    const anonymous = { baseUrl: service.baseUrl, apiKey: '' };
    // A sign-in proof holds for the method and path its challenge was asked on: this extension's.
    const signIn = async (account: PrivateKeyAccount) => {
      const asked = await request(anonymous, 'POST', path, {
        auth: false,
        body,
        headers: { 'idempotency-key': randomUUID() },
      });
      return signedHeader(challengeOf(asked), account);
    };
    const other = await request(anonymous, 'POST', path, {
      auth: false,
      body,
      headers: {
        'idempotency-key': randomUUID(),
        'sign-in-with-x': await signIn(privateKeyToAccount(generatePrivateKey())),
      },
    });
    assert.equal(other.status, 404);
    assert.equal(other.body.error.code, 'service_not_found');

    const headers = { 'idempotency-key': randomUUID() };
    const owner = privateKeyToAccount(buyerKey);
    const unpaid = await request(anonymous, 'POST', path, {
      auth: false,
      body,
      headers: { ...headers, 'sign-in-with-x': await signIn(owner) },
    });
    assert.equal(unpaid.status, 402, JSON.stringify(unpaid.body));
    assert.equal(decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!).accepts[0].amount, '270000');
    const payment = await wallet.pay(unpaid.headers.get('payment-required')!);
    const paid = await request(anonymous, 'POST', path, {
      auth: false,
      body,
      headers: { ...headers, 'sign-in-with-x': await signIn(owner), 'payment-signature': payment },
    });
    assert.equal(paid.status, 200, JSON.stringify(paid.body));
    assert.equal(paid.body.order.extension_of, svc.service_id);
    assert.equal(Date.parse(paid.body.service.expires_at) - Date.parse(svc.expires_at), 3_600_000);
  });
  test('service.expiring always carries how to extend: a service that falls due while the hints are priced waits for the next pass', async () => {
    // Both services move to a host no running worker watches, so that only the passes below record their events.
    const [first, second] = [await stream(1), await stream(1)];
    const host = `watch-${randomUUID()}`;
    await db.query(`UPDATE services SET host_id = $1, status = 'active' WHERE id = ANY($2)`, [
      host,
      [first.service_id, second.service_id],
    ]);
    await expireIn(service, first.service_id, 60);
    const hint: ExtendHint = async (row) => {
      // While the first is priced the second falls due, as a test moving an expiry or a clock passing a lead would.
      if (row.id === first.service_id) await expireIn(service, second.service_id, 60);
      return { extend: { priced_for: row.id } };
    };
    const expiring = async (id: string) =>
      (await db.query(`SELECT data FROM events WHERE type = 'service.expiring' AND service_id = $1`, [id])).rows;

    await recordExpiringServices(db, host, 600, hint);
    assert.deepEqual(
      (await expiring(first.service_id)).map((r) => r.data.extend),
      [{ priced_for: first.service_id }],
    );
    assert.deepEqual(await expiring(second.service_id), [], 'not without its hint');
    await recordExpiringServices(db, host, 600, hint);
    assert.deepEqual(
      (await expiring(second.service_id)).map((r) => r.data.extend),
      [{ priced_for: second.service_id }],
    );
    assert.equal((await expiring(first.service_id)).length, 1, 'once per expiry');
  });
});

describe('extension rules: minimum, past expiry, races', () => {
  const stop = (id: string) => request(service, 'POST', `/services/${id}/stop`);
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  test('an expired service extended by less than the time since its expiry runs the hours bought from its return', {
    timeout: 120_000,
  }, async () => {
    const svc = await stream(1);
    // Expired 20 s ago (within the 36 s grace), extended by 0.003 h = 10.8 s: counted from the old expiry the new one
    // would already be past, the service expired again at once, and nothing left to stop or refund.
    const expiredAt = await expireIn(service, svc.service_id, -20);
    await waitFor('expiry', async () => (await statusOf(svc.service_id)) === 'expired', 15_000);
    const paidFrom = Date.now();
    const back = await extend(svc.service_id, 0.003);
    const paidUntil = Date.now();
    assert.equal(back.status, 200, JSON.stringify(back.body));
    assert.equal(back.body.order.amount.amount, '0.27');
    assert.equal(back.body.service.status, 'active');
    assert.equal(back.body.service.limits.duration_hours, 1.003);
    const expiresAt = Date.parse(back.body.service.expires_at);
    assert.ok(expiresAt - paidFrom >= 10_800, `the hours bought from its return: ${expiresAt - paidFrom} ms`);
    assert.ok(expiresAt - paidUntil <= 10_800 + 5, `not more either: ${expiresAt - paidUntil} ms`);
    assert.ok(expiresAt > expiredAt.getTime() + 20_000 + 10_800, 'not counted from the old expiry');
    assert.match(back.body.service.expires_at, /Z$/);
    const { rows } = await db.query('SELECT status_reason FROM services WHERE id = $1', [svc.service_id]);
    assert.match(rows[0].status_reason, /counted from .*back from expired/);

    await sleep(3000);
    assert.equal(await statusOf(svc.service_id), 'active', 'still running 3 s later');
    const stopped = await stop(svc.service_id);
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    assert.equal(stopped.body.ended.reason, 'stopped');
    // What is left of the hours bought comes back at the rate they were bought; the order's hour is all used.
    const usage = (await request(service, 'GET', `/services/${svc.service_id}/usage`)).body.usage;
    const [{ record }] = (
      await db.query<{ record: string }>('SELECT record FROM audit_records WHERE id = $1', [usage.refund.evaluation_id])
    ).rows;
    const payments = JSON.parse(record).input.payments as Array<{ kind: string; hours: string; unused_hours: string }>;
    assert.deepEqual(
      payments.map((p) => [p.kind, p.hours]),
      [
        ['order', '1'],
        ['extension', '0.003'],
      ],
    );
    assert.equal(payments[0].unused_hours, '0');
    const unusedMs = expiresAt - Date.parse(stopped.body.ended.stopped_at);
    assert.ok(Math.abs(Number(payments[1].unused_hours) * 3_600_000 - unusedMs) < 50, JSON.stringify(payments));
    const unusedMicro = BigInt(Math.round(Number(payments[1].unused_hours) * 1e6));
    assert.equal(BigInt(stopped.body.refund.amount.amount_atomic), (270_000n * unusedMicro) / 3_000n);
  });

  test('an expired service extended by more than the time since its expiry also runs every hour bought from its return', {
    timeout: 120_000,
  }, async () => {
    const svc = await stream(1);
    const expiredAt = await expireIn(service, svc.service_id, -1);
    await waitFor('expiry', async () => (await statusOf(svc.service_id)) === 'expired', 15_000);
    const paidFrom = Date.now();
    const back = await extend(svc.service_id, 0.003);
    assert.equal(back.status, 200, JSON.stringify(back.body));
    assert.equal(back.body.service.status, 'active');
    const expiresAt = Date.parse(back.body.service.expires_at);
    assert.ok(expiresAt - paidFrom >= 10_800, `the hours bought from its return: ${expiresAt - paidFrom} ms`);
    assert.ok(expiresAt - expiredAt.getTime() > 10_800, 'the time it was expired is not taken off');

    // An active service's extension still counts from its expiry, however near.
    const early = await extend(svc.service_id, 0.003);
    assert.equal(early.status, 200, JSON.stringify(early.body));
    assert.equal(Date.parse(early.body.service.expires_at) - expiresAt, 10_800);
  });

  test("an extension shorter than the product's minimum duration is refused before the 402, saying the minimum", async () => {
    const svc = await stream(1);
    for (const hours of [0.0000001, 0.0004]) {
      const tiny = await request(service, 'POST', `/services/${svc.service_id}/extend`, {
        body: { duration_hours: hours },
        headers: { 'idempotency-key': randomUUID() },
      });
      assert.equal(tiny.status, 422, JSON.stringify(tiny.body));
      assert.equal(tiny.body.ok, false);
      assert.equal(tiny.body.error.code, 'extension_too_short');
      assert.equal(tiny.body.error.retryable, false);
      assert.equal(typeof tiny.body.error.request_id, 'string');
      assert.match(
        tiny.body.error.message,
        /at least 0\.0005 hours.*Nothing was charged.*duration_hours of 0\.0005 or more/,
      );
      assert.equal(tiny.body.error.details[0].pointer, '/duration_hours');
      assert.equal(tiny.body.error.details[0].minimum, 0.0005);
      assert.equal(tiny.headers.get('payment-required'), null, 'refused before any payment is asked');
    }
    const least = await request(service, 'POST', `/services/${svc.service_id}/extend`, {
      body: { duration_hours: 0.0005 },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.equal(least.status, 402, 'the minimum itself is sold');
  });

  test('an extension and an upgrade paid at the same moment: one of them is refused before any money moves (3 runs)', {
    timeout: 240_000,
  }, async () => {
    for (let run = 0; run < 3; run++) {
      const svc = await stream(1);
      const ask = async (path: string, body: Record<string, unknown>) => {
        const key = randomUUID();
        const unpaid = await request(service, 'POST', path, { body, headers: { 'idempotency-key': key } });
        assert.equal(unpaid.status, 402, JSON.stringify(unpaid.body));
        const header = unpaid.headers.get('payment-required')!;
        const signature = await wallet.pay(header);
        return {
          amount: BigInt(decodePaymentRequiredHeader(header).accepts[0].amount),
          required: decodePaymentRequiredHeader(header),
          send: () =>
            request(service, 'POST', path, {
              body,
              headers: { 'idempotency-key': key, 'payment-signature': signature },
            }),
        };
      };
      const extension = await ask(`/services/${svc.service_id}/extend`, { duration_hours: 40 });
      const upgrade = await ask(`/services/${svc.service_id}/upgrade`, { product_id: 'event-stream' });
      assert.equal(extension.amount, 800_000n, '40 h at 0.02 USDC');
      const { asset, payTo } = extension.required.accepts[0];
      const [sellerBefore, buyerBefore] = [
        await wallet.balanceOf(asset, payTo),
        await wallet.balanceOf(asset, wallet.address),
      ];

      const [extended, upgraded] = await Promise.all([extension.send(), upgrade.send()]);
      const answers = `run ${run}: ${JSON.stringify([extended.body, upgraded.body])}`;
      assert.ok(extended.status === 200 || upgraded.status === 200, answers);
      assert.ok(extended.status !== 200 || upgraded.status !== 200, `both sold: ${answers}`);
      const refused = extended.status === 200 ? upgraded : extended;
      assert.equal(refused.status, 409, answers);
      assert.ok(
        ['upgrade_in_progress', 'extension_in_progress', 'service_changed'].includes(refused.body.error.code),
        answers,
      );
      assert.match(refused.body.error.message, /nothing was charged/i);

      // Charged exactly what was delivered.
      const charged = extended.status === 200 ? extension.amount : upgrade.amount;
      assert.equal((await wallet.balanceOf(asset, payTo)) - sellerBefore, charged, answers);
      assert.equal(buyerBefore - (await wallet.balanceOf(asset, wallet.address)), charged, answers);
      const now = (await request(service, 'GET', `/services/${svc.service_id}`)).body.service;
      if (extended.status === 200) {
        assert.equal(now.product_id ?? 'instant-stream', 'instant-stream', answers);
        assert.equal(now.limits.duration_hours, 41, answers);
      } else {
        assert.equal(now.limits.duration_hours, 1, `the upgrade delivered no extra hours: ${answers}`);
        assert.equal(Date.parse(now.expires_at), Date.parse(svc.expires_at), answers);
      }
      const { rows } = await db.query('SELECT product_id FROM services WHERE id = $1', [svc.service_id]);
      assert.equal(rows[0].product_id, extended.status === 200 ? 'instant-stream' : 'event-stream', answers);
    }
  });
});
