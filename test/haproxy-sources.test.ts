import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { buy } from './support/purchase.js';
import { basic, closeRawClients, rawClient, sourcePut, statusOf } from './support/raw-source.js';
import { startService, type Service } from './support/service.js';
import { startFfmpegSource, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';

// With ICECAST_PROXY=haproxy, Icecast's mounts have no authentication: HAProxy asks serve about every source and
// listener, and Icecast's one auth thread is never used. These tests hold the source's guarantees end to end.
requireStreamingTools(['icecast2', 'ffmpeg', 'haproxy']);

let service: Service;
let db: pg.Client;
const children: ChildProcess[] = [];

const get = (path: string) => `GET ${path} HTTP/1.0\r\nHost: 127.0.0.1\r\nUser-Agent: source-test\r\n\r\n`;

/** Icecast's loopback port and admin credentials, from its config. */
async function icecast(dataDir: string) {
  const xml = await readFile(join(dataDir, 'icecast', 'icecast.xml'), 'utf8');
  const text = (tag: string) => new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml)?.[1] ?? '';
  const port = Number(text('port'));
  const admin = basic(text('admin-user'), text('admin-password'));
  const mounts = async () => {
    const res = await fetch(`http://127.0.0.1:${port}/admin/listmounts`, { headers: { authorization: admin } });
    return [...(await res.text()).matchAll(/<source mount="([^"]+)"/g)].map((m) => m[1]);
  };
  return { xml, port, sourcePassword: text('source-password'), mounts };
}

const sourceEvents = async (serviceId: string) =>
  (
    await db.query("SELECT type FROM events WHERE service_id = $1 AND type LIKE 'source.%' ORDER BY tx, seq", [
      serviceId,
    ])
  ).rows.map((r) => r.type as string);

describe('sources decided by serve through HAProxy (ICECAST_PROXY=haproxy)', () => {
  before(async () => {
    service = await startService({ ICECAST_PROXY: 'haproxy', LIFECYCLE_INTERVAL_MS: '250' });
    const lock = JSON.parse(await readFile(join(service.dataDir, 'serve.lock'), 'utf8'));
    db = new pg.Client({ connectionString: lock.database_url });
    await db.connect();
  });
  after(async () => {
    closeRawClients();
    for (const c of children) c.kill('SIGKILL');
    await db?.end();
    await service?.stop();
  });

  test("Icecast authenticates nothing itself: a source gets in only with serve's yes, one per mount, noted as it comes and goes", async () => {
    const ice = await icecast(service.dataDir);
    assert.doesNotMatch(ice.xml, /<authentication type=/, 'no mount authentication');
    assert.doesNotMatch(ice.xml, /\/icecast\/(stream_auth|mount_add|mount_remove|listener_add|listener_remove)/);
    // Icecast's source password is in Icecast's and HAProxy's 0600 files only, never in a buyer's hands.
    const luaPath = join(service.dataDir, 'haproxy', 'admission.lua');
    assert.ok((await readFile(luaPath, 'utf8')).includes(basic('source', ice.sourcePassword)));
    for (const path of [luaPath, join(service.dataDir, 'icecast', 'icecast.xml')])
      assert.equal((await stat(path)).mode & 0o077, 0, `${path} is private`);

    const dev = await devFile(service.dataDir);
    const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
    const bought = await buy(service, wallet, {
      product_id: 'instant-stream',
      email: 'haproxy-sources@example.com',
      station_name: 'Sources FM',
      parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
    });
    assert.equal(bought.status, 200, JSON.stringify(bought.body));
    const svc = bought.body.service as { service_id: string; stream_url: string; broadcast_url: string };
    const broadcast = new URL(svc.broadcast_url);
    const publicPort = Number(broadcast.port);
    const mount = broadcast.pathname;
    const [user, pass] = [decodeURIComponent(broadcast.username), decodeURIComponent(broadcast.password)];

    // Wrong credentials through HAProxy: Icecast's own 401, and Icecast never saw it (no mount, no event).
    const wrong = await rawClient(publicPort, sourcePut(mount, basic(user, `${pass}x`)), '127.0.2.1');
    assert.equal(await statusOf(wrong), 401, wrong.received());
    assert.match(wrong.received(), /^HTTP\/1\.0 401 Authentication Required\r\nServer: Icecast 2\.4\.4\r\n/);
    // Icecast's own source credentials from outside are a refusal too: serve knows no such user.
    const internal = await rawClient(publicPort, sourcePut(mount, basic('source', ice.sourcePassword)), '127.0.2.1');
    assert.equal(await statusOf(internal), 401);
    // Straight to Icecast from an address other than HAProxy's and serve's, even with its own credentials: closed.
    const direct = await rawClient(ice.port, sourcePut(mount, basic('source', ice.sourcePassword)), '127.0.0.2');
    await direct.closed;
    assert.equal(direct.received(), '', 'Icecast answered a connection it should not accept');
    await sleep(500);
    assert.deepEqual(await ice.mounts(), [], 'no mount appeared');
    assert.deepEqual(await sourceEvents(svc.service_id), []);

    // The buyer's encoder: taken, and serve hears it from HAProxy as Icecast took it.
    const encoder = startFfmpegSource(svc.broadcast_url);
    children.push(encoder);
    await waitFor('the mount live', async () => (await ice.mounts()).includes(mount) || undefined, 20_000);
    await waitFor('source.connected', async () => (await sourceEvents(svc.service_id)).length === 1 || undefined);
    assert.deepEqual(await sourceEvents(svc.service_id), ['source.connected']);

    // A second source with the right credentials: Icecast keeps the mount for the first (its 403), and that refusal
    // is not the first one's end.
    const second = await rawClient(publicPort, sourcePut(mount, basic(user, pass)), '127.0.3.1');
    assert.equal(await statusOf(second), 403, second.received());
    await second.closed;
    await sleep(1000);
    assert.deepEqual(await sourceEvents(svc.service_id), ['source.connected']);
    assert.deepEqual(await ice.mounts(), [mount]);

    // Listeners: exactly the cap, and the places held stay held past the life-cycle worker's 10 s for places Icecast
    // no longer lists (it lists HAProxy's listeners by the ticket before their agent).
    const stream = new URL(svc.stream_url);
    const path = stream.pathname + stream.search;
    const listeners = [
      await rawClient(publicPort, get(path), '127.0.4.1'),
      await rawClient(publicPort, get(path), '127.0.5.1'),
    ];
    for (const l of listeners) assert.equal(await statusOf(l), 200);
    assert.equal(await statusOf(await rawClient(publicPort, get(path), '127.0.6.1')), 401, 'the third is refused');
    await sleep(11_000);
    const places = async () =>
      (await db.query('SELECT ip FROM listeners WHERE service_id = $1 ORDER BY ip', [svc.service_id])).rows.map(
        (r) => r.ip as string,
      );
    assert.deepEqual(await places(), ['127.0.4.0/24', '127.0.5.0/24']);
    assert.equal(await statusOf(await rawClient(publicPort, get(path), '127.0.7.1')), 401, 'still full after 11 s');
    // One leaves: its place is freed at once, and the passes that list Icecast's clients again (their count changed)
    // keep the other's place, found by the ticket before its agent.
    listeners[0].socket.destroy();
    await waitFor("the leaver's place freed", async () => (await places()).length < 2 || undefined, 10_000);
    await sleep(4000);
    assert.deepEqual(await places(), ['127.0.5.0/24']);
    assert.ok(!listeners[1].socket.destroyed, 'the other listener is still served');

    // The encoder hangs up: serve hears its end from HAProxy's close line.
    encoder.kill('SIGKILL');
    await waitFor('source.disconnected', async () => (await sourceEvents(svc.service_id)).length === 2 || undefined);
    assert.deepEqual(await sourceEvents(svc.service_id), ['source.connected', 'source.disconnected']);
  });
});
