/**
 * A minimal raw Icecast source client over a TCP socket, for the streaming benchmark (bench/streaming.ts).
 * Icecast 2.4.4 takes `PUT /mount HTTP/1.1` (HTTP source protocol, since 2.4.0) as well as the legacy `SOURCE` method;
 * with `Expect: 100-continue` it answers `HTTP/1.1 100 Continue` once the source is admitted (stream_auth accepted and
 * the mount reserved), otherwise `HTTP/1.0 200 OK`; a refusal is 401 (auth) or 403 (mount in use / too many sources).
 */
import { createConnection, type Socket } from 'node:net';

export interface SourceTarget {
  host: string;
  port: number;
  mount: string;
  authorization: string;
}

/** broadcast_url is icecast://user:pass@host:port/mount (or http://…). */
export function sourceTarget(broadcastUrl: string): SourceTarget {
  const u = new URL(broadcastUrl.replace(/^icecast:/, 'http:'));
  const user = decodeURIComponent(u.username);
  const pass = decodeURIComponent(u.password);
  return {
    host: u.hostname,
    port: Number(u.port || 8000),
    mount: u.pathname,
    authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`,
  };
}

export interface SourceConnection {
  /** HTTP status of Icecast's first answer (100/200 = admitted), 0 when the socket closed before any. */
  status: number;
  admitted: boolean;
  statusLine: string;
  ms: number;
  socket: Socket;
}

/** Opens a source connection and resolves with Icecast's first answer; the socket stays open (admitted or not). */
export function connectSource(t: SourceTarget, timeoutMs = 10_000): Promise<SourceConnection> {
  const began = performance.now();
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: t.host, port: t.port });
    socket.setNoDelay(true);
    let head = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer from Icecast for the source on ${t.mount} within ${timeoutMs} ms`));
    }, timeoutMs);
    const finish = (statusLine: string) => {
      clearTimeout(timer);
      socket.removeAllListeners('data');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0);
      resolve({
        status,
        admitted: status === 100 || status === 200,
        statusLine,
        ms: performance.now() - began,
        socket,
      });
    };
    socket.once('connect', () =>
      socket.write(
        [
          `PUT ${t.mount} HTTP/1.1`,
          `Host: ${t.host}:${t.port}`,
          `Authorization: ${t.authorization}`,
          'User-Agent: bench-source',
          'Content-Type: audio/mpeg',
          'Ice-Public: 0',
          'Ice-Name: bench',
          'Expect: 100-continue',
          '',
          '',
        ].join('\r\n'),
      ),
    );
    socket.on('data', (d: Buffer) => {
      head += d.toString('latin1');
      const eol = head.indexOf('\r\n');
      if (eol >= 0) finish(head.slice(0, eol));
    });
    socket.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    socket.once('close', () => {
      if (!head.includes('\r\n')) finish('');
    });
  });
}

/** MPEG-1 layer III frame boundaries of a CBR file (no ID3/Xing assumed), so the loop can restart on a frame. */
export function mp3FrameOffsets(bytes: Buffer): number[] {
  const bitrates = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
  const rates = [44100, 48000, 32000];
  const out: number[] = [];
  let i = 0;
  while (i + 4 <= bytes.length) {
    if (bytes[i] !== 0xff || (bytes[i + 1] & 0xe0) !== 0xe0) {
      i++;
      continue;
    }
    const version = (bytes[i + 1] >> 3) & 3; // 3 = MPEG-1, 2 = MPEG-2
    const br = bitrates[bytes[i + 2] >> 4] ?? 0;
    const sr = rates[(bytes[i + 2] >> 2) & 3];
    const pad = (bytes[i + 2] >> 1) & 1;
    if (!br || !sr || (version !== 3 && version !== 2)) {
      i++;
      continue;
    }
    const size = version === 3 ? Math.floor((144000 * br) / sr) + pad : Math.floor((72000 * br) / (sr / 2)) + pad;
    out.push(i);
    i += size;
  }
  return out;
}

/**
 * Sends `frames` of `bytes` (a CBR MP3) on an admitted source socket at real-time pace (`bytesPerSecond`), looping,
 * in 100 ms ticks; returns a stop function. Bytes written are counted in `sent.bytes`.
 */
export function pumpSource(
  socket: Socket,
  bytes: Buffer,
  frames: number[],
  bytesPerSecond: number,
  sent = { bytes: 0 },
): () => void {
  let frame = 0;
  let mine = 0;
  const started = performance.now();
  const tick = () => {
    if (socket.destroyed || socket.writableLength > 64_000) return; // Icecast not reading: do not buffer without bound
    const due = ((performance.now() - started) / 1000) * bytesPerSecond;
    const chunks: Buffer[] = [];
    while (mine < due) {
      const from = frames[frame];
      const to = frame + 1 < frames.length ? frames[frame + 1] : bytes.length;
      chunks.push(bytes.subarray(from, to));
      mine += to - from;
      sent.bytes += to - from;
      frame = (frame + 1) % frames.length;
    }
    if (chunks.length) socket.write(Buffer.concat(chunks));
  };
  tick();
  const timer = setInterval(tick, 100);
  return () => clearInterval(timer);
}
