import assert from 'node:assert/strict';
import { type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { postWebhook, verifySignature, webhookUrlPolicy } from '../src/events/index.js';
import { buy, payFor } from './support/purchase.js';
import { createApiKey } from './support/api-key.js';
import { request, startService, type Service } from './support/service.js';
import { expireIn } from './support/expiry.js';
import { shortLivedCatalog } from './support/short-catalog.js';
import { openSse } from './support/sse.js';
import { connectListener, startFfmpegSource, waitFor, type Listener } from './support/streaming.js';
import { TestWallet } from './support/wallet.js';
import { socketOwner, startReceiver, type Delivery } from './support/webhook-receiver.js';
import { requireStreamingTools } from './support/system-tools.js';
import { devFile, buyerWallet } from './support/dev-file.js';
import { connectDatabase, serveLock } from './support/serve-lock.js';

requireStreamingTools();

const eventEnv = {
  LIFECYCLE_INTERVAL_MS: '250',
  WEBHOOK_ALLOW_INSECURE_LOOPBACK: '1',
  EVENTS_EXPIRING_LEAD_SECONDS: '10',
  WEBHOOK_POLL_INTERVAL_MS: '200',
  WEBHOOK_RETRY_BASE_SECONDS: '1',
  WEBHOOK_RETRY_MAX_SECONDS: '2',
  WEBHOOK_LEASE_SECONDS: '6',
  EVENTS_HEARTBEAT_MS: '1000',
  WEBHOOK_CONCURRENCY: '8',
  WEBHOOK_CONCURRENCY_PER_KEY: '4',
  WEBHOOK_SLOW_SLOTS: '2',
  // The first test keeps three streams of one service open to the end, the shutdown test one more of the same key.
  EVENTS_MAX_STREAMS_PER_KEY: '5',
  EVENTS_MAX_STREAMS_PER_SERVICE: '3',
  // Instances that share a database share the key that seals webhook secrets.
  WEBHOOK_SECRETS_KEY: randomBytes(32).toString('base64'),
};

let service: Service;
let wallet: TestWallet;
let catalog: Awaited<ReturnType<typeof shortLivedCatalog>>;
const cleanups: (() => unknown)[] = [];

before(async () => {
  catalog = await shortLivedCatalog();
  service = await startService({ CATALOG_DIR: catalog.catalogDir, RULES_DIR: catalog.rulesDir, ...eventEnv });
  wallet = await buyerWallet(service);
});
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await service?.stop();
  await catalog?.remove();
});

const register = async (
  url: string,
  fields: Record<string, unknown> = {},
  on: Pick<Service, 'baseUrl' | 'apiKey'> = service,
) => {
  const created = await request(on, 'POST', '/webhooks', { body: { url, ...fields } });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  assert.match(created.body.secret, /^whsec_/);
  return created.body as { webhook: { id: string }; secret: string };
};

const stream = async (
  hours: number,
  on: Pick<Service, 'baseUrl' | 'apiKey'> = service,
  more: Record<string, unknown> = {},
) => {
  const bought = await buy(on, wallet, {
    product_id: 'instant-stream',
    email: 'ops@example.com',
    station_name: 'Event FM',
    parameters: { duration_hours: hours, max_listeners: 1, bitrate_kbps: 64, ...more },
  });
  assert.equal(bought.status, 200, JSON.stringify(bought.body));
  return bought.body as {
    order: { id: string };
    service: { service_id: string; stream_url: string; broadcast_url: string; expires_at: string };
  };
};

const listen = (url: string) =>
  waitFor(
    'a listener',
    async () => {
      const l = await connectListener(url).catch(() => undefined);
      if (l?.status === 200) return l;
      l?.close();
      return undefined;
    },
    20_000,
  );

/** The outbox row of an event for the endpoint at `url`, once no worker holds it any more (delivered or failed). */
async function deliveryState(url: string, eventId: string): Promise<{ state: string; attempts: number }> {
  const client = await connectDatabase(service);
  try {
    return await waitFor('the delivery to leave the pending outbox', async () => {
      const { rows } = await client.query<{ state: string; attempts: number }>(
        `SELECT d.state, d.attempts FROM webhook_deliveries d
           JOIN webhook_endpoints w ON w.id = d.endpoint_id JOIN events e ON e.seq = d.event_seq
          WHERE w.url = $1 AND e.id = $2`,
        [url, eventId],
      );
      return rows[0]?.state === 'pending' ? undefined : rows[0];
    });
  } finally {
    await client.end();
  }
}

function verified(delivery: Delivery, secret: string): boolean {
  return verifySignature(String(delivery.headers['x-agent-audio-signature']), delivery.body, secret);
}

describe('events', () => {
  test("a stream's life arrives signed by webhook and over SSE, in order; SSE resumes after Last-Event-ID", async () => {
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    const { secret } = await register(receiver.url);
    const bought = await stream(1); // its end is moved near once the source has come and gone
    const id = bought.service.service_id;
    const sse = await openSse(`${service.baseUrl}/services/${id}/events`, {
      authorization: `Bearer ${service.apiKey}`,
    });
    cleanups.push(() => sse.close());
    assert.equal(sse.status, 200);
    assert.match(sse.contentType ?? '', /^text\/event-stream/);

    const ofService = (type: string) => (d: Delivery) => d.event.type === type && d.event.service_id === id;
    await receiver.next(ofService('service.active'));
    // An endpoint for this one service gets its events from now on.
    const serviceReceiver = await startReceiver();
    cleanups.push(() => serviceReceiver.close());
    const forService = await register(serviceReceiver.url, { service_id: id });
    assert.equal(
      (await request(service, 'GET', '/webhooks')).body.webhooks.find(
        (w: { id: string }) => w.id === forService.webhook.id,
      ).service_id,
      id,
    );
    const encoder: ChildProcess = startFfmpegSource(bought.service.broadcast_url);
    cleanups.push(() => encoder.kill('SIGKILL'));
    await receiver.next(ofService('source.connected'));
    const listener: Listener = await listen(bought.service.stream_url);
    const threshold = await receiver.next(ofService('listeners.threshold'));
    assert.deepEqual(threshold.event.data, { listeners: 1, max_listeners: 1, threshold_percent: 100 });
    listener.close();
    encoder.kill('SIGKILL');
    await receiver.next(ofService('source.disconnected'));
    // Within EVENTS_EXPIRING_LEAD_SECONDS of its end from now: service.expiring at the next pass, then the expiry.
    const expiresAt = (await expireIn(service, id, 4)).toISOString();
    await receiver.next(ofService('service.expired'), 60_000);

    const mine = receiver.deliveries.filter((d) => d.event.service_id === id || d.event.order_id === bought.order.id);
    for (const d of mine) {
      assert.ok(verified(d, secret), `signature of ${d.event.type}`);
      assert.equal(d.headers['x-agent-audio-event-id'], d.event.id);
    }
    const unique = [...new Map(mine.map((d) => [d.event.id, d.event])).values()];
    assert.deepEqual(
      unique.map((e) => e.type),
      [
        'order.paid',
        'service.active',
        'source.connected',
        'listeners.threshold',
        'source.disconnected',
        'service.expiring',
        'service.expired',
      ],
    );
    await serviceReceiver.next((d) => d.event.type === 'service.expired');
    assert.deepEqual(
      serviceReceiver.deliveries.map((d) => d.event.id),
      unique.slice(2).map((e) => e.id),
    );
    assert.ok(serviceReceiver.deliveries.every((d) => verified(d, forService.secret)));
    const paid = unique[0];
    assert.equal(paid.order_id, bought.order.id);
    assert.match(String(paid.data.transaction), /^0x[0-9a-f]{64}$/);
    const expiring = unique.find((e) => e.type === 'service.expiring')!;
    assert.equal(expiring.data.expires_at, expiresAt);

    // SSE: the same events with the same ids, a heartbeat comment, and a resume that gets only the later ones.
    await waitFor('the SSE events', () => sse.messages.length >= unique.length, 10_000);
    assert.deepEqual(
      sse.messages.map((m) => [m.id, m.event]),
      unique.map((e) => [e.id, e.type]),
    );
    assert.deepEqual(JSON.parse(sse.messages[2].data), unique[2]);
    assert.ok(sse.comments.includes('heartbeat'), 'heartbeats');
    const resumed = await openSse(`${service.baseUrl}/services/${id}/events`, {
      authorization: `Bearer ${service.apiKey}`,
      'last-event-id': unique[2].id,
    });
    cleanups.push(() => resumed.close());
    await waitFor('the resumed events', () => resumed.messages.length >= unique.length - 3, 10_000);
    assert.deepEqual(
      resumed.messages.map((m) => m.id),
      unique.slice(3).map((e) => e.id),
    );
    const byQuery = await openSse(`${service.baseUrl}/services/${id}/events?last_event_id=${unique[5].id}`, {
      authorization: `Bearer ${service.apiKey}`,
    });
    cleanups.push(() => byQuery.close());
    await waitFor('the events after service.expiring', () => byQuery.messages.length >= 1, 10_000);
    assert.deepEqual(
      byQuery.messages.map((m) => m.event),
      ['service.expired'],
    );

    const unknown = await request(service, 'GET', `/services/${id}/events`, {
      headers: { 'last-event-id': 'evt_nosuchevent' },
    });
    assert.equal(unknown.status, 422);
    assert.equal(unknown.body.error.code, 'unknown_last_event_id');
    const stranger = await request({ ...service, apiKey: 'aa_live_not_a_key' }, 'GET', `/services/${id}/events`);
    assert.equal(stranger.status, 401);
  });

  test('a receiver that fails gets retries with growing delays; a rotated secret signs alongside the new one', async () => {
    const failing = await startReceiver((_, i) => ({ status: i < 2 ? 500 : 200 }));
    const rotating = await startReceiver();
    cleanups.push(
      () => failing.close(),
      () => rotating.close(),
    );
    await register(failing.url, { events: ['order.paid'] });
    const old = await register(rotating.url, { events: ['order.paid'] });
    const rotated = await request(service, 'POST', `/webhooks/${old.webhook.id}/rotate-secret`);
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
    assert.notEqual(rotated.body.secret, old.secret);
    assert.ok(Date.parse(rotated.body.webhook.previous_secret_valid_until) > Date.now() + 23 * 3600_000);

    const bought = await stream(1);
    const third = await failing.next((d) => failing.deliveries.indexOf(d) === 2, 30_000);
    const attempts = failing.deliveries.slice(0, 3);
    assert.ok(
      attempts.every((d) => d.event.id === third.event.id && d.body === third.body),
      'the same event, the same body',
    );
    assert.equal(third.event.order_id, bought.order.id);
    const first = attempts[1].at - attempts[0].at;
    const second = attempts[2].at - attempts[1].at;
    assert.ok(first >= 800, `first retry after ${first} ms, at least 80 % of WEBHOOK_RETRY_BASE_SECONDS`);
    assert.ok(second > first, `backoff grows: ${first} ms, then ${second} ms`);
    // The 2xx takes the delivery out of the outbox's pending rows, the only ones a worker sends: nothing follows it.
    const outbox = await deliveryState(failing.url, third.event.id);
    assert.deepEqual(outbox, { state: 'delivered', attempts: 3 });
    assert.equal(failing.deliveries.length, 3, 'no delivery after the 2xx');

    const signed = await rotating.next((d) => d.event.order_id === bought.order.id);
    assert.equal(String(signed.headers['x-agent-audio-signature']).match(/v1=/g)?.length, 2);
    assert.ok(verified(signed, rotated.body.secret), 'the new secret verifies');
    assert.ok(verified(signed, old.secret), 'the old secret verifies during the grace period');
    assert.ok(!verified(signed, 'whsec_someone_else'));
    const listed = await request(service, 'GET', '/webhooks');
    assert.ok(listed.body.webhooks.some((w: { id: string }) => w.id === old.webhook.id));
    assert.ok(
      listed.body.webhooks.every((w: Record<string, unknown>) => !('secret' in w)),
      'secrets are never listed',
    );
    const deleted = await request(service, 'DELETE', `/webhooks/${old.webhook.id}`);
    assert.equal(deleted.status, 200);
    assert.equal((await request(service, 'DELETE', `/webhooks/${old.webhook.id}`)).status, 404);
  });

  test('a suspension and the upgrade that ends it arrive as service.suspended, order.paid and upgrade.applied', async () => {
    const bought = await stream(0.05, service, { max_listeners: 2, transfer_gb: 0.00003 });
    const id = bought.service.service_id;
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    const { secret } = await register(receiver.url, {
      service_id: id,
      events: ['service.suspended', 'order.paid', 'upgrade.applied'],
    });
    const encoder = startFfmpegSource(bought.service.broadcast_url);
    cleanups.push(() => encoder.kill('SIGKILL'));
    const listener = await listen(bought.service.stream_url);
    cleanups.push(() => listener.close());
    const suspended = await receiver.next((d) => d.event.type === 'service.suspended', 60_000);
    assert.equal(suspended.event.data.previous_status, 'active');
    assert.match(String(suspended.event.data.reason), /more than the 0\.00003 GB bought/);

    const upgrade = await payFor(service, wallet, `/services/${id}/upgrade`, { product_id: 'event-stream' });
    assert.equal(upgrade.status, 200, JSON.stringify(upgrade.body));
    const applied = await receiver.next((d) => d.event.type === 'upgrade.applied');
    assert.deepEqual(
      receiver.deliveries.map((d) => d.event.type),
      ['service.suspended', 'order.paid', 'upgrade.applied'],
    );
    const paid = receiver.deliveries[1].event;
    assert.equal(paid.order_id, upgrade.body.order.id);
    assert.equal(paid.service_id, id);
    assert.equal(paid.data.upgrade_of, id);
    assert.equal(applied.event.order_id, upgrade.body.order.id);
    assert.equal(applied.event.data.product_id, 'event-stream');
    assert.equal(applied.event.data.status, 'active');
    assert.ok(receiver.deliveries.every((d) => verified(d, secret)));
  });

  test('webhook URLs on private, metadata or plain-http addresses are refused at registration', async () => {
    for (const url of [
      'http://169.254.169.254/latest/meta-data',
      'https://169.254.169.254/hook',
      'https://10.1.2.3/hook',
      'https://[::ffff:192.168.0.1]/hook',
      'http://example.com/hook',
      'ftp://127.0.0.1/x',
    ]) {
      const refused = await request(service, 'POST', '/webhooks', { body: { url } });
      assert.equal(refused.status, 422, url);
      assert.equal(refused.body.error.code, 'webhook_url_not_allowed', url);
      assert.match(refused.body.error.message, /https/, url);
    }
    const other = await request(service, 'POST', '/webhooks', {
      body: { url: 'http://127.0.0.1:9/x', service_id: 'svc_not_one_of_yours' },
    });
    assert.equal(other.status, 404);
    assert.equal(other.body.error.code, 'service_not_found');
  });

  test('a delivery continues on another instance after the one delivering it is killed', async () => {
    const lock = await serveLock(service);
    const dev = await devFile(service);
    const second = await startService({
      ...eventEnv,
      CATALOG_DIR: catalog.catalogDir,
      RULES_DIR: catalog.rulesDir,
      DATABASE_URL: lock.database_url,
      CHAIN_RPC_URL: dev.chain.rpc_url,
      DEV_FACILITATOR_ACCOUNT: '4',
    });
    cleanups.push(() => second.stop('SIGKILL'));
    const pids = [service.process.pid!, second.process.pid!];
    let secondKilled = false;
    // Deliveries from the first instance are refused (and retried) until the second one is caught mid-delivery.
    const receiver = await startReceiver((delivery) => {
      if (secondKilled) return { status: 200 };
      return {
        status: 500,
        release: socketOwner(delivery.remotePort, pids).then(async (owner) => {
          if (owner !== second.process.pid) return;
          secondKilled = true;
          await second.stop('SIGKILL');
        }),
      };
    });
    cleanups.push(() => receiver.close());
    const { secret } = await register(receiver.url, { events: ['order.paid'] });
    const bought = await stream(1);
    await waitFor('the second instance to deliver and be killed', () => secondKilled, 60_000);
    const killedAt = Date.now();
    const after = await receiver.next((d) => d.at >= killedAt, 60_000);
    assert.equal(after.event.order_id, bought.order.id);
    assert.ok(verified(after, secret));
    await waitFor(
      'the delivery recorded',
      async () => {
        const listed = await request(service, 'GET', '/webhooks');
        return (
          listed.body.webhooks.find((w: { url: string; consecutive_failures: number }) => w.url === receiver.url)
            ?.consecutive_failures === 0
        );
      },
      20_000,
    );
  });

  test("one key's many slow endpoints and backlog do not hold up another key's webhooks", async () => {
    const created = await createApiKey(service, 'slow-endpoints');
    const slowBuyer = { baseUrl: service.baseUrl, apiKey: created.api_key as string };
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => {
      answer = resolve;
    });
    // Answers only when the test ends: every attempt to it waits out the 5 s timeout and is retried.
    const slow = await startReceiver(() => ({ status: 200, release: answered }));
    const fast = await startReceiver();
    cleanups.push(() => fast.close());
    const slowHooks: string[] = [];
    try {
      for (let i = 0; i < 20; i++)
        slowHooks.push((await register(`${slow.url}?endpoint=${i}`, {}, slowBuyer)).webhook.id);
      await stream(1, slowBuyer); // order.paid and service.active for each of the 20 endpoints: 40 slow deliveries
      await slow.next(() => slow.deliveries.length >= 2);

      await register(fast.url, { events: ['order.paid'] });
      const bought = await stream(1);
      await fast.next((d) => d.event.order_id === bought.order.id, 30_000);
      const attempted = new Set(slow.deliveries.map((d) => `${d.path} ${d.event.id}`));
      assert.ok(
        attempted.size < 40,
        `the other key's event came while the slow key's backlog was pending (${attempted.size} of 40 tried)`,
      );
      assert.ok(
        slow.mostOpen() <= 4,
        `at most WEBHOOK_CONCURRENCY_PER_KEY deliveries to one key at a time, got ${slow.mostOpen()}`,
      );
    } finally {
      for (const id of slowHooks) await request(slowBuyer, 'DELETE', `/webhooks/${id}`); // their deliveries are dropped
      answer();
      await slow.close();
    }
  });

  test('event streams are capped per API key and per service: the next one gets 429 too_many_event_streams', async () => {
    const created = await createApiKey(service, 'many-streams');
    const owner = { baseUrl: service.baseUrl, apiKey: created.api_key as string };
    const [one, two] = [(await stream(1, owner)).service.service_id, (await stream(1, owner)).service.service_id];
    const open = async (id: string) => {
      const sse = await openSse(`${service.baseUrl}/services/${id}/events`, {
        authorization: `Bearer ${owner.apiKey}`,
      });
      cleanups.push(() => sse.close());
      assert.equal(sse.status, 200);
      return sse;
    };
    const refused = async (id: string, limit: RegExp) => {
      const answer = await request(owner, 'GET', `/services/${id}/events`);
      assert.equal(answer.status, 429, JSON.stringify(answer.body));
      assert.equal(answer.body.ok, false);
      assert.equal(answer.body.error.code, 'too_many_event_streams');
      assert.equal(answer.body.error.retryable, true);
      assert.match(answer.body.error.message, limit);
    };
    const ofOne = [await open(one), await open(one), await open(one)];
    await refused(one, /This service already has 3 event streams open/);
    await open(two);
    await open(two);
    await refused(two, /This API key already has 5 event streams open/);
    ofOne[0].close();
    await waitFor('a closed stream to free its place', async () => {
      const sse = await openSse(`${service.baseUrl}/services/${two}/events`, {
        authorization: `Bearer ${owner.apiKey}`,
      });
      cleanups.push(() => sse.close());
      if (sse.status === 200) return true;
      sse.close();
      return false;
    });
  });

  test('an SSE stream ends within a heartbeat when its API key is revoked, and the key cannot open it again', async () => {
    const created = await createApiKey(service, 'sse-revoked');
    const owner = { baseUrl: service.baseUrl, apiKey: created.api_key };
    const bought = await stream(1, owner);
    const url = `${service.baseUrl}/services/${bought.service.service_id}/events`;
    const sse = await openSse(url, { authorization: `Bearer ${created.api_key}` });
    cleanups.push(() => sse.close());
    await waitFor('the first events', () => sse.messages.length >= 2, 10_000);
    assert.equal((await service.cli(['keys', 'revoke', created.id])).code, 0);
    await waitFor('the stream to end', () => sse.ended(), 10_000);
    assert.equal(sse.endedCleanly(), true);
    assert.ok(
      sse.comments.some((c) => c.startsWith('the API key was revoked')),
      sse.comments.join('\n'),
    );
    const again = await openSse(url, { authorization: `Bearer ${created.api_key}` });
    again.close();
    assert.equal(again.status, 401);
  });

  test('on shutdown SSE streams are ended cleanly, not cut', async () => {
    const bought = await stream(1);
    const sse = await openSse(`${service.baseUrl}/services/${bought.service.service_id}/events`, {
      authorization: `Bearer ${service.apiKey}`,
    });
    await waitFor('the first events', () => sse.messages.length >= 2, 10_000);
    assert.equal(await service.stop(), 0);
    await sse.reading;
    assert.equal(sse.endedCleanly(), true, 'the response ended with its terminating chunk');
  });
});

test('a webhook host that resolves to a public address when registered and to a private one when delivering is refused (DNS rebinding)', async () => {
  const answers = [['93.184.216.34'], ['169.254.169.254']];
  const policy = webhookUrlPolicy({ resolve: async () => answers.shift() ?? ['169.254.169.254'] });
  assert.equal(await policy.refuse('https://rebind.example/hook'), undefined, 'public when checked');
  answers.unshift(['93.184.216.34']);
  const outcome = await postWebhook('https://rebind.example/hook', '{}', {}, policy, 5000);
  assert.equal(outcome.ok, false);
  assert.match(outcome.error ?? '', /169\.254\.169\.254.*at connect time/);
});
