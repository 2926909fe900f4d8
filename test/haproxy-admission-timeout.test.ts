import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { stationOnAir, type OnAir } from './support/on-air.js';
import { startService, type Service } from './support/service.js';
import { waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { basic, closeRawClients, rawClient, sourcePut, statusOf } from './support/raw-source.js';
import { rawListener } from './support/tcp-sockets.js';

// HAProxy waits LISTENER_ADMISSION_TIMEOUT_MS for serve's decision on a listener; its httpclient then sends the
// same request again (3 times), and then HAProxy tells the listener the host is busy (503, come back: nothing was
// decided). When serve, busy, answers those requests after that, it takes a place for a listener that was sent away:
// the refused connection's close line names its ticket,
// and that place is freed, however many of the requests come after the close, at once rather than when the
// life-cycle worker finds it (70 s later).
requireStreamingTools(['icecast2', 'ffmpeg', 'haproxy']);

let service: Service;
let station: OnAir;

before(async () => {
  service = await startService({ ICECAST_PROXY: '', LISTENER_ADMISSION_TIMEOUT_MS: '1000' });
  station = await stationOnAir(service, 1, 'Busy FM');
});
after(async () => {
  closeRawClients();
  station?.encoder.kill('SIGKILL');
  await service?.stop();
});

/** Whether a listener from `from` is admitted now (it leaves at once). */
async function admits(from: string): Promise<boolean> {
  const listener = await rawListener(station.publicPort, station.path, from);
  listener.socket.destroy();
  return listener.status() === 200;
}

test("a listener sent away because serve answered too late (503, busy) leaves no place behind: the stream's one place is free again", async () => {
  // The stream's one place is free once the probe that found it live has gone.
  await waitFor('the place free', () => admits('127.0.10.1'), 20_000);
  await waitFor('the place free again', () => admits('127.0.11.1'), 20_000);

  const pid = service.process.pid!;
  process.kill(pid, 'SIGSTOP');
  let refused;
  let encoderAnswer;
  try {
    // An encoder asking for a mount meanwhile is not told its credentials are wrong either.
    const broadcast = new URL(station.broadcastUrl);
    const authorization = basic(decodeURIComponent(broadcast.username), decodeURIComponent(broadcast.password));
    const source = await rawClient(
      station.publicPort,
      sourcePut(`/other-${Date.now()}.mp3`, authorization),
      '127.0.12.2',
    );
    refused = await rawListener(station.publicPort, station.path, '127.0.12.1');
    await statusOf(source, 20_000);
    encoderAnswer = source.received();
    source.socket.destroy();
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  const answer = refused.received().toString('latin1', 0, 300);
  assert.equal(refused.status(), 503, answer);
  assert.match(answer, /\r\nRetry-After: 2\r\n/, 'the listener is told when to come back');
  assert.match(answer, /host is busy/);
  assert.match(encoderAnswer, /^HTTP\/1\.0 503 Service Unavailable\r\n[\s\S]*Retry-After: 2\r\n/, encoderAnswer);
  refused.socket.destroy();

  // serve now reads the admission HAProxy gave up on, and the close line of the refused connection.
  const started = Date.now();
  await waitFor('a new listener admitted', () => admits('127.0.13.1'), 15_000);
  console.log(`the place was free again ${Date.now() - started} ms after serve went on`);
});
