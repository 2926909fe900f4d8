import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { stationOnAir, type OnAir } from './support/on-air.js';
import { startService, type Service } from './support/service.js';
import { hasMpegFrame, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { peerOf, rawListener, tcpSockets, type RawListener } from './support/tcp-sockets.js';
import { connectDatabase } from './support/serve-lock.js';

// ICECAST_PROXY=front-door, the fallback where HAProxy cannot be installed: serve's own front door
// (src/provisioning/front-door.ts) holds the public port and relays every byte; Icecast asks serve about each
// listener, told the listener's real address through the front door's ticket. The same admissions as with HAProxy.
requireStreamingTools(['icecast2', 'ffmpeg']);

const PLACES = 3;
let service: Service;
let station: OnAir;
let db: pg.Client;
const listeners: RawListener[] = [];

before(async () => {
  service = await startService({ ICECAST_PROXY: 'front-door' });
  db = await connectDatabase(service);
  station = await stationOnAir(service, PLACES, 'Door FM');
});
after(async () => {
  for (const l of listeners) l.socket.destroy();
  station?.encoder.kill('SIGKILL');
  await db?.end();
  await service?.stop();
});

test('/health/details names the front door; Icecast asks serve about listeners itself', async () => {
  const details = (await (await fetch(service.metricsUrl.replace(/\/metrics$/, '/health/details'))).json()) as {
    checks: { icecast: { ok: boolean; proxy: string; public_port: number } };
  };
  assert.equal(details.checks.icecast.proxy, 'front-door', JSON.stringify(details.checks.icecast));
  assert.equal(details.checks.icecast.public_port, station.publicPort);
  const icecastXml = await readFile(join(service.dataDir, 'icecast', 'icecast.xml'), 'utf8');
  assert.match(icecastXml, /listener_add/);
});

test('listeners get the cap exactly, each place with its own network; serve holds their connections', async () => {
  const places = async () =>
    (await db.query('SELECT ip FROM listeners WHERE service_id = $1', [station.serviceId])).rows.map(
      (r) => r.ip as string,
    );
  // The probe that saw the mount go live has left its place.
  await waitFor('no place taken', async () => (await places()).length === 0, 10_000);
  for (let i = 0; i <= PLACES; i++)
    listeners.push(await rawListener(station.publicPort, station.path, `127.0.${i + 10}.1`));
  assert.deepEqual(
    listeners.map((l) => l.status()),
    [...Array(PLACES).fill(200), 401],
  );
  const admitted = listeners.slice(0, PLACES);
  await waitFor('audio for every listener', () => admitted.every((l) => hasMpegFrame(l.received().subarray(200))));
  const networks = await waitFor(
    'the places written',
    async () => {
      const found = await places();
      return found.length === PLACES ? found.sort() : undefined;
    },
    10_000,
  );
  assert.deepEqual(networks, ['127.0.10.0/24', '127.0.11.0/24', '127.0.12.0/24']);

  // The relay is serve's: the listeners' and the encoder's peers are its process, and so are the connections into
  // Icecast that carry them.
  const all = tcpSockets();
  const pid = service.process.pid!;
  for (const l of admitted) {
    const mine = all.find((s) => s.local === l.socket.localPort && s.remote === station.publicPort && s.state === '01');
    assert.equal(mine && peerOf(all, mine)?.owner?.pid, pid, `the listener on port ${l.socket.localPort}`);
  }
  assert.equal(peerOf(all, station.encoderSocket)?.owner?.pid, pid, "the encoder's peer");
  const serveToIcecast = all.filter(
    (s) => s.owner?.pid === pid && s.remote === station.icecastPort && s.state === '01',
  );
  assert.ok(serveToIcecast.length >= PLACES + 1, `serve's connections to Icecast: ${serveToIcecast.length}`);
});

test("the buyer's source credentials send a title through the front door, and no other admin command", async () => {
  const broadcast = new URL(station.broadcastUrl);
  const authorization = `Basic ${Buffer.from(`${decodeURIComponent(broadcast.username)}:${decodeURIComponent(broadcast.password)}`).toString('base64')}`;
  const mount = encodeURIComponent(broadcast.pathname);
  const ask = async (requestLine: string) => {
    const answer = await rawRequest(station.publicPort, `${requestLine}\r\nAuthorization: ${authorization}\r\n\r\n`);
    return Number(/^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1] ?? 0);
  };
  assert.equal(await ask(`GET /admin/metadata?mount=${mount}&mode=updinfo&song=Door%20Song HTTP/1.0`), 200);
  for (const line of [
    `GET /admin/killsource?mount=${mount} HTTP/1.0`,
    `GET /admin/listclients?mount=${mount} HTTP/1.0`,
    `GET /admin/moveclients?mount=${mount}&destination=/elsewhere HTTP/1.0`,
    `GET /admin/metadata?mount=${mount}&mode=updinfo&MOUNT=/other&song=x HTTP/1.0`,
    `GET /admin.cgi?mode=updinfo&song=x HTTP/1.0`,
    `STATS / HTTP/1.0`,
    `DELETE ${broadcast.pathname} HTTP/1.0`,
  ])
    assert.equal(await ask(line), 401, line);
  // The source is still on the air: the refused killsource never reached Icecast.
  const admitted = listeners[0];
  const before = admitted.received().length;
  await waitFor('audio after the refused commands', () => admitted.received().length > before + 8000, 10_000);
  assert.equal(station.encoder.exitCode, null);
});

/** Sends `text` on a new connection to the port and resolves with what comes back until the other side closes. */
function rawRequest(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(text));
    let got = '';
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer')));
    socket.on('data', (chunk) => {
      got += chunk.toString('latin1');
    });
    socket.on('close', () => resolve(got));
    socket.on('error', reject);
  });
}
