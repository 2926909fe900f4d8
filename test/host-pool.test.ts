import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { buy } from './support/purchase.js';
import { openSse } from './support/sse.js';
import { request, roomyCatalog, scratchDir, startService, type Service } from './support/service.js';
import {
  connectListener,
  exitOf,
  hasMpegFrame,
  listenWhenLive,
  startFfmpegSource,
  waitFor,
  within,
} from './support/streaming.js';
import { icecastTitle } from './support/icecast-title.js';
import { requireStreamingTools } from './support/system-tools.js';
import { mp3, sine } from './support/tones.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';
import { serveLock } from './support/serve-lock.js';

requireStreamingTools();

// One PostgreSQL and one chain; three streaming hosts of two stream slots each and two API instances, all on
// loopback. Orders sent to either API instance are placed on whichever live host has room; a host killed with a
// live stream loses it to a host with room within the bound.
const SLOTS = 2;
const DOWN_AFTER_SECONDS = 5;
const pool = { HOST_DOWN_AFTER_SECONDS: String(DOWN_AFTER_SECONDS), HOST_HEARTBEAT_MS: '500' };
const running: Service[] = [];
let api1: Service;
let api2: Service;
const hosts: Record<'a' | 'b' | 'c', Service> = {} as never;
let wallet: TestWallet;
/** Each host's public Icecast address, by host id. */
let hostUrls: Map<string, string>;
/** A live stream placed on host B, ordered through API 1. */
let liveOnB: { host: string; service: any };
/** An instant stream ordered through API 2, on host B or C. */
let onBorC: { host: string; service: any };
/** The first stream placed on host A. */
let firstOnA: { host: string; service: any };

after(async () => {
  // The instances attached to the first one stop together, before the first one takes their PostgreSQL down.
  const [first, ...attached] = running;
  await Promise.all(attached.map((s) => s.stop()));
  await first?.stop();
});

before(
  async () => {
    const catalog = await roomyCatalog();
    const media = await scratchDir('audio-pool-media-');
    api1 = await startService({ ...catalog, ...pool, MEDIA_DIR: media }, { args: ['--role', 'api'] });
    running.push(api1);
    const lock = await serveLock(api1);
    const dev = await devFile(api1);
    wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
    const shared = {
      ...catalog,
      ...pool,
      MEDIA_DIR: media,
      DATABASE_URL: lock.database_url,
      CHAIN_RPC_URL: dev.chain.rpc_url,
    };
    const host = (id: string) =>
      startService(
        { ...shared, STREAMING_HOST_ID: id, ICECAST_MAX_SOURCES: String(SLOTS), ICECAST_MAX_LISTENERS: '20' },
        { args: ['--role', 'host'] },
      );
    const started = await Promise.all([
      host('pool-a'),
      host('pool-b'),
      host('pool-c'),
      startService({ ...shared, DEV_FACILITATOR_ACCOUNT: '7' }, { args: ['--role', 'api'] }),
    ]);
    running.push(...started);
    [hosts.a, hosts.b, hosts.c, api2] = started;
    // Both API instances sell with the first one's key.
    api2 = { ...api2, apiKey: api1.apiKey };
    hostUrls = new Map((await hostList()).map((h: any) => [h.id, h.public_url]));
  },
  { timeout: 300_000 },
);

async function hostList(): Promise<any[]> {
  const listed = await api1.cli(['hosts', 'list', '--json']);
  assert.equal(listed.code, 0, listed.stderr);
  return JSON.parse(listed.stdout);
}

async function hostsCli(...args: string[]) {
  return api1.cli(['hosts', ...args]);
}

const instant = (station: string) => ({
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: station,
  parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
});

/** Buys through one API instance; the id of the host the service was placed on, and the service. */
async function order(through: Service, body: Record<string, unknown>) {
  const bought = await buy(through, wallet, body);
  assert.equal(bought.status, 200, JSON.stringify(bought.body));
  const service = bought.body.service;
  const origin = new URL(service.stream_url).origin;
  const host = [...hostUrls].find(([, url]) => new URL(url).origin === origin)?.[0];
  assert.ok(host, `${service.stream_url} is on one of the pool's hosts`);
  return { host, service };
}

describe('a pool of streaming hosts behind two API instances', { timeout: 600_000 }, () => {
  test('serve takes --role api, host or all', async () => {
    const wrong = await api1.cli(['serve', '--role', 'relay']);
    assert.equal(wrong.code, 2);
    assert.match(wrong.stderr, /--role must be one of api, host, all/);
    assert.match((await api1.cli(['serve', '--help'])).stdout, /--role api {5}the HTTP API only/);
  });

  test('every host registers itself with its capacity and a heartbeat', async () => {
    const listed = await hostList();
    assert.deepEqual(listed.map((h) => h.id).sort(), ['pool-a', 'pool-b', 'pool-c']);
    for (const h of listed) {
      assert.equal(h.state, 'up');
      assert.equal(h.live, true);
      assert.deepEqual(h.capacity, { sources: SLOTS, listeners: 20, bandwidth_kbps: null });
      assert.deepEqual(h.in_use, { sources: 0, listeners: 0 });
      assert.ok(h.heartbeat_age_seconds < 30);
    }
    // A host answers only its Icecast's callbacks: the API is elsewhere.
    assert.equal((await request(hosts.a, 'GET', '/health')).status, 404);
  });

  test('orders through API 1 fill host A; API 2 places on B and C; a drained host gets nothing new', async () => {
    assert.equal((await hostsCli('drain', 'pool-b')).code, 0);
    assert.equal((await hostsCli('drain', 'pool-c')).code, 0);
    for (let i = 0; i < SLOTS; i++) {
      const placed = await order(api1, instant(`A${i}`));
      assert.equal(placed.host, 'pool-a');
      firstOnA ??= placed;
    }

    assert.equal((await hostsCli('undrain', 'pool-b')).code, 0);
    assert.equal((await hostsCli('undrain', 'pool-c')).code, 0);
    // An AutoDJ service through API 2: its host, not the API instance, plays it.
    const autodj = await order(api2, {
      product_id: 'temporary-autodj',
      email: 'agent@example.com',
      station_name: 'Pool DJ',
      parameters: { duration_hours: 1, listeners: 2, bitrate_kbps: 64, storage_mb: 5 },
    });
    const second = await order(api2, instant('BC'));
    assert.deepEqual([autodj.host, second.host].sort(), ['pool-b', 'pool-c'], 'the most free places first');
    onBorC = second;

    const upload = await request(api2, 'PUT', `/services/${autodj.service.service_id}/files/tone.mp3`, {
      rawBody: await sine({ seconds: 20 }, mp3()),
      headers: { 'content-type': 'application/octet-stream' },
    });
    assert.equal(upload.status, 201, JSON.stringify(upload.body));
    const listener = await waitFor(
      `the AutoDJ on ${autodj.host}`,
      async () => {
        const l = await connectListener(autodj.service.stream_url).catch(() => undefined);
        if (l?.status === 200) return l;
        l?.close();
        await sleep(250);
        return undefined;
      },
      30_000,
    );
    try {
      await waitFor('MP3 frames from the AutoDJ', () => hasMpegFrame(listener.received()), 15_000);
    } finally {
      listener.close();
    }

    // C drained: the next order goes to B, whichever instance takes it.
    assert.equal((await hostsCli('drain', 'pool-c')).code, 0);
    liveOnB = await order(api1, instant('B only'));
    assert.equal(liveOnB.host, 'pool-b');
  });

  test('every live host full: 503 capacity_exhausted, Retry-After from the first expiry, nothing charged', async () => {
    const ask = await request(api2, 'POST', '/orders', {
      body: instant('No room'),
      headers: { 'idempotency-key': `pool-full-${process.pid}` },
    });
    assert.equal(ask.status, 503, JSON.stringify(ask.body));
    assert.equal(ask.body.error.code, 'capacity_exhausted');
    assert.match(ask.body.error.message, /Nothing was charged/);
    assert.equal(ask.headers.get('payment-required'), null, 'no payment is asked for');
    const retryAfter = Number(ask.headers.get('retry-after'));
    assert.ok(retryAfter > 3000 && retryAfter <= 3600, `Retry-After ${retryAfter}: the first stream ends within 1 h`);
    // The draining host's free slot is not sold; once it takes placements again, it is: the last slot of the pool,
    // which two buyers pay for at once through the two API instances. One gets it, the other is not charged.
    assert.equal((await hostsCli('undrain', 'pool-c')).code, 0);
    const attempts = await Promise.all(
      [api1, api2].map(async (through, i) => {
        const key = `pool-last-${process.pid}-${i}`;
        // An instance checks before payment against a count up to a second old: C shows within a second.
        const offer = await waitFor(`an offer through API ${i + 1} once C takes placements`, async () => {
          const answer = await request(through, 'POST', '/orders', {
            body: instant('Last'),
            headers: { 'idempotency-key': key },
          });
          if (answer.status === 402) return answer;
          assert.equal(answer.body.error?.code, 'capacity_exhausted', JSON.stringify(answer.body));
          await sleep(100);
          return undefined;
        });
        const required = offer.headers.get('payment-required')!;
        return { through, key, required, signature: await wallet.pay(required) };
      }),
    );
    const { asset } = decodePaymentRequiredHeader(attempts[0].required).accepts[0];
    const before = await wallet.balanceOf(asset, wallet.address);
    const answers = await Promise.all(
      attempts.map((a) =>
        request(a.through, 'POST', '/orders', {
          body: instant('Last'),
          headers: { 'idempotency-key': a.key, 'payment-signature': a.signature },
        }),
      ),
    );
    assert.deepEqual(answers.map((a) => a.status).sort(), [200, 503], JSON.stringify(answers.map((a) => a.body)));
    const won = answers.find((a) => a.status === 200)!;
    assert.equal(answers.find((a) => a.status === 503)!.body.error.code, 'capacity_exhausted');
    assert.equal(new URL(won.body.service.stream_url).origin, new URL(hostUrls.get('pool-c')!).origin);
    assert.equal(before - (await wallet.balanceOf(asset, wallet.address)), BigInt(won.body.order.amount.amount_atomic));
  });

  test('hosts list shows what each host carries; a host with live services cannot be removed', async () => {
    const listed = new Map((await hostList()).map((h) => [h.id, h]));
    for (const id of ['pool-a', 'pool-b', 'pool-c']) {
      assert.deepEqual(listed.get(id).in_use.sources, SLOTS, id);
      assert.equal(listed.get(id).state, 'up');
    }
    assert.equal(listed.get('pool-a').in_use.listeners, 2 * SLOTS);
    // /availability counts the whole pool; a product is available only where one host could take it.
    const availability = await request(api2, 'GET', '/availability', { auth: false });
    assert.deepEqual(availability.body.capacity.stream_slots, { total: 3 * SLOTS, free: 0 });
    const instantNow = availability.body.products.find((p: any) => p.product_id === 'instant-stream');
    assert.equal(instantNow.available_now, false);
    const refused = await hostsCli('remove', 'pool-a');
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /still holds 2 live services/);
    assert.equal((await hostsCli('remove', 'no-such-host')).code, 1);
    const metrics = await (await fetch(api1.metricsUrl)).text();
    assert.match(metrics, /streaming_host_places\{host="pool-a",kind="sources",use="free"\} 0/);
    const details = (await (await fetch(api1.metricsUrl.replace(/\/metrics$/, '/health/details'))).json()) as any;
    assert.deepEqual(details.checks.hosts.hosts.map((h: any) => h.id).sort(), ['pool-a', 'pool-b', 'pool-c']);
  });

  test('a service stopped through an API instance loses its encoder and listeners on its host', async () => {
    const { service, host } = liveOnB;
    const encoder = startFfmpegSource(service.broadcast_url);
    try {
      const listener = await listenWhenLive(service.stream_url);
      // The owner's title, set through API 2, reaches the players from B (B's reconciler sends it to its mount).
      const titled = await request(api2, 'PUT', `/services/${service.service_id}/now-playing`, {
        body: { title: 'Pool Song', artist: 'Pool Band' },
      });
      assert.equal(titled.status, 200, JSON.stringify(titled.body));
      await waitFor(
        "the owner's title on host B's mount",
        async () => {
          if ((await icecastTitle(hosts.b, new URL(service.stream_url).pathname)) === 'Pool Band - Pool Song')
            return true;
          await sleep(200);
          return false;
        },
        15_000,
      );
      const stopped = await request(api1, 'POST', `/services/${service.service_id}/stop`);
      assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
      // No worker of the API instance can reach host B's Icecast: B's reconciler, woken by PostgreSQL, cuts them.
      const cut = await Promise.race([
        Promise.all([listener.ended, exitOf(encoder, 20_000).catch(() => 'still running')]),
        sleep(20_000, 'timeout', { ref: false }),
      ]);
      assert.notEqual(cut, 'timeout', 'the listener of a stopped service is still connected after 20 s');
      const again = await connectListener(service.stream_url);
      again.close();
      assert.notEqual(again.status, 200, 'nobody plays on the stopped mount');
      const listed = new Map((await hostList()).map((h) => [h.id, h]));
      assert.equal(listed.get(host).in_use.sources, SLOTS - 1, 'its slot is free again');
    } finally {
      encoder.kill('SIGKILL');
    }
  });

  test('a host killed with a live stream: it moves, is heard on its new host, the pool sells on', async () => {
    // Room for it: A's first stream is stopped, a slot of A is free.
    const stopped = await request(api2, 'POST', `/services/${firstOnA.service.service_id}/stop`);
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    const { service, host: lostId } = onBorC;
    const lost = lostId === 'pool-b' ? hosts.b : hosts.c;
    const encoder = startFfmpegSource(service.broadcast_url);
    const listener = await listenWhenLive(service.stream_url);
    const events = await openSse(`${api2.baseUrl}/services/${service.service_id}/events`, {
      authorization: `Bearer ${api1.apiKey}`,
    });
    try {
      lost.process.kill('SIGKILL');
      await exitOf(lost.process, 10_000);
      await within(listener.ended, 20_000, 'timed out waiting for the listener cut with its host');
      encoder.kill('SIGKILL');
      const moved = await waitFor(
        'the stream to move off the killed host',
        async () => {
          const read = (await request(api1, 'GET', `/services/${service.service_id}`)).body.service;
          return read.stream_url !== service.stream_url ? read : undefined;
        },
        (DOWN_AFTER_SECONDS + 30) * 1000,
      );
      const movedTo = [...hostUrls].find(([, url]) => new URL(url).origin === new URL(moved.stream_url).origin)?.[0];
      assert.ok(movedTo && movedTo !== lostId, `moved to another host of the pool: ${moved.stream_url}`);
      const told = await waitFor('service.moved on the event stream', () =>
        events.messages.find((m) => m.event === 'service.moved'),
      );
      assert.equal(JSON.parse(told.data).data.stream_url, moved.stream_url);

      // The encoder reconnects to the new broadcast URL; a listener on the new stream URL hears it.
      const again = startFfmpegSource(moved.broadcast_url);
      try {
        const newListener = await listenWhenLive(moved.stream_url);
        try {
          await waitFor('audio from the moved stream', () => hasMpegFrame(newListener.received()), 15_000);
        } finally {
          newListener.close();
        }
      } finally {
        again.kill('SIGKILL');
      }
      await sellsUntilFull(lostId);
    } finally {
      encoder.kill('SIGKILL');
      events.close();
    }
  });
});

/** Orders through both API instances land on live hosts (never `lostId`) while one has a slot; then 503. */
async function sellsUntilFull(lostId: string): Promise<void> {
  const listed = await waitFor('the killed host counted down', async () => {
    const all = await hostList();
    return all.find((h) => h.id === lostId)?.state === 'down' ? all : undefined;
  });
  const freeSlots = listed
    .filter((h) => h.state === 'up' && h.live)
    .reduce((n, h) => n + h.capacity.sources - h.in_use.sources, 0);
  for (let i = 0; i < freeSlots; i++) {
    const placed = await order(i % 2 ? api1 : api2, instant(`After loss ${i}`));
    assert.notEqual(placed.host, lostId);
  }
  // An instance checks before payment against a count up to a second old: the other instance's last sale shows then.
  const full = await waitFor('the pool full to both instances', async () => {
    const answer = await request(api2, 'POST', '/orders', {
      body: instant('After loss, full'),
      headers: { 'idempotency-key': `pool-after-loss-${process.pid}` },
    });
    if (answer.status !== 402) return answer;
    await sleep(100);
    return undefined;
  });
  assert.equal(full.status, 503, JSON.stringify(full.body));
  assert.equal(full.body.error.code, 'capacity_exhausted');
}
