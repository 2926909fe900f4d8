import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import net from 'node:net';
import { liveSine } from './tones.js';

export interface Listener {
  status: number;
  contentType: string | undefined;
  headersAfterMs: number;
  received(): Buffer;
  ended: Promise<void>;
  close(): void;
}

export function connectListener(url: string): Promise<Listener> {
  const began = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { 'user-agent': 'icecast-test' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      const ended = new Promise<void>((done) => {
        res.once('close', () => done());
      });
      resolve({
        status: res.statusCode ?? 0,
        contentType: res.headers['content-type'],
        headersAfterMs: Math.round(performance.now() - began),
        received: () => Buffer.concat(chunks),
        ended,
        close: () => req.destroy(),
      });
    });
    req.once('error', reject);
  });
}

export function startFfmpegSource(url: string, kbps = 64): ChildProcess {
  return liveSine(url, { kbps });
}

export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** A listener on `url` once its mount is live (Icecast answers 404 before the source connects). */
export function listenWhenLive(url: string, timeoutMs = 20_000): Promise<Listener> {
  return waitFor(
    'the mount to go live',
    async () => {
      const l = await connectListener(url).catch(() => undefined);
      if (l?.status === 200) return l;
      l?.close();
      return undefined;
    },
    timeoutMs,
  );
}

export function exitOf(child: ChildProcess, timeoutMs: number): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return Promise.race([
    once(child, 'exit').then(([code]) => code as number | null),
    sleep(timeoutMs, undefined, { ref: false }).then(() => {
      throw new Error(`process ${child.pid} did not exit within ${timeoutMs} ms`);
    }),
  ]);
}

/**
 * `promise`, or a failure with `message` after `ms`. The timer does not keep the test process alive once the promise
 * has settled (a plain setTimeout in a race would hold the file's end back until it fires).
 */
export function within<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  return Promise.race([
    promise,
    sleep(ms, undefined, { ref: false }).then(() => {
      throw new Error(message);
    }),
  ]);
}

/** A source refused when it asks for the mount (Icecast's URL auth answers 401/403), not cut after it was let in. */
export async function assertSourceRefused(broadcastUrl: string, timeoutMs = 20_000): Promise<void> {
  const intruder = startFfmpegSource(broadcastUrl);
  let said = '';
  intruder.stderr!.on('data', (chunk: Buffer) => {
    said += chunk;
  });
  try {
    assert.notEqual(await exitOf(intruder, timeoutMs), 0, 'the source is refused');
  } finally {
    intruder.kill('SIGKILL');
  }
  assert.match(said, /40[13]|Unauthorized|Forbidden/, said);
}

/** A listener refused on this stream URL: it gets no 200. */
export async function assertListenerRefused(streamUrl: string): Promise<void> {
  const stray = await connectListener(streamUrl);
  stray.close();
  assert.notEqual(stray.status, 200, `a listener was admitted on ${streamUrl}`);
}

/** Does an MPEG audio frame header (11 sync bits) appear in these bytes? */
export function hasMpegFrame(bytes: Buffer): boolean {
  for (let i = 0; i + 1 < bytes.length; i++) if (bytes[i] === 0xff && (bytes[i + 1] & 0xe0) === 0xe0) return true;
  return false;
}

/** A listener on a raw socket counting every byte it receives (response headers included, as Icecast counts). */
export interface RawListener {
  status: () => number;
  received: () => number;
  close: () => number;
}
export function rawListener(port: number, path: string, agent: string): Promise<RawListener> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = 0;
    let head = '';
    let status = 0;
    socket.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (!status) {
        head += chunk.toString('latin1');
        const m = /^HTTP\/1\.\d (\d{3})/.exec(head);
        if (m) status = Number(m[1]);
      }
    });
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: ${agent}\r\n\r\n`);
      resolve({
        status: () => status,
        received: () => received,
        close: () => {
          socket.destroy();
          return received;
        },
      });
    });
  });
}
