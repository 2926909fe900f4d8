import assert from 'node:assert/strict';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { stationOnAir, type OnAir } from './support/on-air.js';
import { startService, type Service } from './support/service.js';
import { hasMpegFrame, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import {
  establishedBy,
  peerOf,
  rawListener,
  tcpSockets,
  type RawListener,
  type TcpSocket,
} from './support/tcp-sockets.js';
import { serveLock } from './support/serve-lock.js';

// With the default settings, the audio of listeners and sources goes through no Node process: the kernel says which
// process holds each connection (/proc/net/tcp and the socket inodes in /proc/<pid>/fd). HAProxy holds the
// listener's and the encoder's connections, HAProxy's own connections reach Icecast, and serve holds as many TCP
// connections with 20 listeners in as with none.
requireStreamingTools(['icecast2', 'ffmpeg', 'haproxy']);

const HELD = 20;
let service: Service;
let station: OnAir;
/** serve's PostgreSQL: its pool opens and closes connections of its own accord, so they are left out of the count. */
let postgresPort: number;
const listeners: RawListener[] = [];

before(async () => {
  // Empty: the default, whatever the environment running the tests says.
  service = await startService({ ICECAST_PROXY: '' });
  const lock = await serveLock(service);
  postgresPort = Number(new URL(lock.database_url).port);
  station = await stationOnAir(service, HELD + 5, 'Owner FM');
});
after(async () => {
  for (const l of listeners) l.socket.destroy();
  station?.encoder.kill('SIGKILL');
  await service?.stop();
});

/** One of serve's connections, with the process at its other end ('elsewhere': not on this machine, or gone). */
interface ServeSocket extends TcpSocket {
  peer: string;
}

/** serve's established TCP connections but those to its PostgreSQL, each with the process at its other end. */
function serveSockets(): ServeSocket[] {
  const all = tcpSockets();
  return establishedBy(all, service.process.pid!)
    .filter((s) => s.remote !== postgresPort)
    .map((s) => ({ ...s, peer: peerOf(all, s)?.owner?.name ?? 'elsewhere' }));
}

/** serve's connections once their count has held still for 3 s (HAProxy's admission requests to serve closed). */
async function settledServeSockets(): Promise<ServeSocket[]> {
  let last = serveSockets();
  let still = 0;
  for (let i = 0; i < 30 && still < 3; i++) {
    await sleep(1000);
    const now = serveSockets();
    still = now.length === last.length ? still + 1 : 0;
    last = now;
  }
  return last;
}

/** The connections that would carry audio: to HAProxy or Icecast. */
const dataPath = (sockets: ServeSocket[]) => sockets.filter((s) => s.peer === 'haproxy' || s.peer === 'icecast2');

test('the default proxy is HAProxy, and /health/details says so', async () => {
  const details = (await (await fetch(service.metricsUrl.replace(/\/metrics$/, '/health/details'))).json()) as {
    checks: { icecast: { ok: boolean; proxy: string; public_port: number } };
  };
  assert.equal(details.checks.icecast.ok, true, JSON.stringify(details.checks.icecast));
  assert.equal(details.checks.icecast.proxy, 'haproxy');
  assert.equal(details.checks.icecast.public_port, station.publicPort);
});

test("the listeners' and the encoder's connections are held by HAProxy; serve holds none of them", async () => {
  const before = await settledServeSockets();
  for (let i = 0; i < HELD; i++)
    listeners.push(await rawListener(station.publicPort, station.path, `127.0.${i + 10}.1`));
  assert.deepEqual(
    listeners.map((l) => l.status()),
    Array(HELD).fill(200),
  );
  await waitFor('audio for every listener', () => listeners.every((l) => hasMpegFrame(l.received().subarray(200))));

  const all = tcpSockets();
  const pid = service.process.pid!;
  for (const l of listeners) {
    const mine = all.find((s) => s.local === l.socket.localPort && s.remote === station.publicPort && s.state === '01');
    assert.ok(mine, `the listener's socket (port ${l.socket.localPort}) is in /proc/net/tcp`);
    const end = peerOf(all, mine);
    assert.equal(end?.owner?.name, 'haproxy', `the listener's peer: ${JSON.stringify(end)}`);
    assert.notEqual(end?.owner?.pid, pid);
  }
  const encoderPeer = peerOf(all, station.encoderSocket);
  assert.equal(encoderPeer?.owner?.name, 'haproxy', `the encoder's peer: ${JSON.stringify(encoderPeer)}`);

  // Icecast's side: HAProxy's connections carry the 20 listeners and the source.
  const intoIcecast = all.filter((s) => s.remote === station.icecastPort && s.state === '01');
  const fromHaproxy = intoIcecast.filter((s) => s.owner?.name === 'haproxy');
  assert.ok(fromHaproxy.length >= HELD + 1, `HAProxy's connections to Icecast: ${fromHaproxy.length}`);
  for (const s of fromHaproxy) assert.equal(peerOf(all, s)?.owner?.name, 'icecast2');

  // serve: nothing on the public port, no more connections to HAProxy or Icecast than before the listeners came, and
  // about as many in all (the chain's RPC and this test's own HTTP requests come and go; 20 listeners relayed by
  // serve would be 40 more).
  const serveNow = await settledServeSockets();
  assert.deepEqual(
    serveNow.filter((s) => s.local === station.publicPort || s.remote === station.publicPort),
    [],
    'serve holds no connection of the public port',
  );
  const shown = (sockets: ServeSocket[]) => sockets.map((s) => `${s.local}->${s.remote} ${s.peer}`).join(', ');
  console.log(
    `serve's TCP connections (but to PostgreSQL): ${before.length} with no listener, ${serveNow.length} with ` +
      `${HELD} held; to HAProxy or Icecast ${dataPath(before).length} and ${dataPath(serveNow).length}`,
  );
  assert.ok(
    dataPath(serveNow).length <= dataPath(before).length,
    `serve's connections to HAProxy or Icecast: ${shown(dataPath(serveNow))}; before: ${shown(dataPath(before))}`,
  );
  assert.ok(
    serveNow.length <= before.length + 2,
    `serve holds ${serveNow.length} connections with ${HELD} listeners, ${before.length} without: ${shown(serveNow)}`,
  );
  for (const l of listeners) assert.ok(!l.socket.destroyed, 'every listener is still held');
});
