import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before, test } from 'node:test';
import { stationOnAir, type OnAir } from './support/on-air.js';
import { startService, type Service } from './support/service.js';
import { startFfmpegSource, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { peerOf, rawListener, tcpSockets, type RawListener } from './support/tcp-sockets.js';

// HAProxy holds two descriptors per connection. Under an open-files limit of 4,096, one HAProxy cannot hold the
// 5,150 connections Icecast may carry by default, so serve runs three of them on the public port (SO_REUSEPORT):
// serve's cap holds whichever of them a listener reaches, and when one dies all are started again and every place
// is free again.
requireStreamingTools(['icecast2', 'ffmpeg', 'haproxy']);

const PLACES = 8;
let service: Service;
let station: OnAir;
let encoder: ChildProcess;
const listeners: RawListener[] = [];

before(async () => {
  service = await startService({ ICECAST_PROXY: '' }, { openFiles: 4096 });
  station = await stationOnAir(service, PLACES, 'Shared Port FM');
  encoder = station.encoder;
});
after(async () => {
  for (const l of listeners) l.socket.destroy();
  encoder?.kill('SIGKILL');
  await service?.stop();
});

/** The HAProxy processes listening on the public port. */
function listeningHaproxies(): number[] {
  const holders = tcpSockets()
    .filter((s) => s.state === '0A' && s.local === station.publicPort && s.owner?.name === 'haproxy')
    .map((s) => s.owner!.pid);
  return [...new Set(holders)].sort();
}

/** A listener from its own /24 (serve tells listeners apart by network), once the stream admits it. */
const admitted = (i: number) =>
  waitFor(
    `listener ${i} admitted`,
    async () => {
      const l = await rawListener(station.publicPort, station.path, `127.0.${i + 10}.1`);
      if (l.status() === 200) return l;
      l.socket.destroy();
      return undefined;
    },
    20_000,
  );

async function fillTheStream(): Promise<void> {
  listeners.length = 0;
  for (let i = 0; i < PLACES; i++) listeners.push(await admitted(i));
}

test('three HAProxy processes listen on the public port', () => {
  assert.equal(listeningHaproxies().length, 3, JSON.stringify(listeningHaproxies()));
});

test('the listener cap holds across the processes: the ninth listener of an eight-place stream is refused', async () => {
  await fillTheStream();
  const all = tcpSockets();
  const holders = new Set(
    listeners.map((l) => {
      const mine = all.find((s) => s.local === l.socket.localPort && s.remote === station.publicPort);
      return peerOf(all, mine!)?.owner?.pid;
    }),
  );
  // Eight connections all on one of three processes would happen once in 2,187 runs.
  assert.ok(holders.size >= 2, `the processes holding the listeners: ${[...holders]}`);
  const ninth = await rawListener(station.publicPort, station.path, '127.0.99.1');
  assert.equal(ninth.status(), 401, ninth.received().toString('latin1', 0, 200));
  ninth.socket.destroy();
});

test('when one process dies, all restart, every listener is cut and the places are free again', async () => {
  const before = listeningHaproxies();
  process.kill(before[1], 'SIGKILL');
  await waitFor('every listener cut', () => listeners.every((l) => l.socket.destroyed || l.socket.readableEnded));
  const restarted = await waitFor(
    'three new processes on the port',
    () => {
      const now = listeningHaproxies();
      return now.length === 3 && now.every((pid) => !before.includes(pid)) && now;
    },
    20_000,
  );
  assert.equal(restarted.length, 3);
  // The encoder's connection went with its process: a new one takes the mount again.
  encoder.kill('SIGKILL');
  encoder = startFfmpegSource(station.broadcastUrl);
  await fillTheStream();
  const ninth = await rawListener(station.publicPort, station.path, '127.0.99.1');
  assert.equal(ninth.status(), 401);
  ninth.socket.destroy();
});
