import { connect } from 'node:net';

/**
 * A bare HTTP/1.1 client on a TCP socket, for requests that fetch (undici) and node:http refuse to send:
 * control characters in header values, any method token, a literal request target ("..", spaces, raw UTF-8),
 * duplicate or conflicting headers, chunked bodies with bad framing. It writes exactly the bytes it is given.
 */

export type HeaderValue = string | Buffer;

export interface RawRequest {
  method: string;
  /** Written as is (UTF-8 for characters above U+00FF, Latin-1 otherwise). */
  target: string | Buffer;
  headers: [string, HeaderValue][];
  body?: Buffer;
  /** 'length' (default): Content-Length of body; 'chunked': one chunk; 'none': no framing header at all. */
  framing?: 'length' | 'chunked' | 'none';
  /** Adds Host unless the headers already hold one or this is false. */
  host?: string | false;
  version?: string;
}

export interface RawAnswer {
  /** 0 when the server closed the connection without a status line. */
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** Why the answer is incomplete, if it is (connection closed early, reset, timeout). */
  problem?: string;
}

export function encodeText(value: string | Buffer): Buffer {
  if (Buffer.isBuffer(value)) return value;
  return /[^\u0000-\u00ff]/.test(value) ? Buffer.from(value, 'utf8') : Buffer.from(value, 'latin1');
}

export function buildRawRequest(request: RawRequest): Buffer {
  const parts: Buffer[] = [
    encodeText(request.method),
    Buffer.from(' '),
    encodeText(request.target),
    Buffer.from(` ${request.version ?? 'HTTP/1.1'}\r\n`),
  ];
  const names = new Set(request.headers.map(([name]) => name.toLowerCase()));
  const headers: [string, HeaderValue][] = [];
  if (request.host !== false && !names.has('host')) headers.push(['Host', request.host ?? 'localhost']);
  headers.push(...request.headers);
  if (!names.has('connection')) headers.push(['Connection', 'close']);
  const framing = request.framing ?? 'length';
  let body = request.body ?? Buffer.alloc(0);
  if (framing === 'length' && request.body !== undefined && !names.has('content-length'))
    headers.push(['Content-Length', String(body.length)]);
  if (framing === 'chunked') {
    if (!names.has('transfer-encoding')) headers.push(['Transfer-Encoding', 'chunked']);
    body = Buffer.concat([
      body.length ? Buffer.from(`${body.length.toString(16)}\r\n`) : Buffer.alloc(0),
      body,
      body.length ? Buffer.from('\r\n') : Buffer.alloc(0),
      Buffer.from('0\r\n\r\n'),
    ]);
  }
  for (const [name, value] of headers)
    parts.push(encodeText(name), Buffer.from(': '), encodeText(value), Buffer.from('\r\n'));
  parts.push(Buffer.from('\r\n'), body);
  return Buffer.concat(parts);
}

/** Sends the bytes on a fresh connection and reads one answer. The socket is never half-closed: Node drops a pending answer when the client ends first. */
export function sendRaw(origin: string, bytes: Buffer, timeoutMs = 15_000): Promise<RawAnswer> {
  const url = new URL(origin);
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname);
    let received = Buffer.alloc(0);
    let settled = false;
    const finish = (problem?: string, closed = false) => {
      if (settled) return;
      const parsed = parseAnswer(received);
      // Without Content-Length or chunks the body ends with the connection.
      const complete =
        parsed.complete ||
        (closed &&
          parsed.status > 0 &&
          parsed.headers['content-length'] === undefined &&
          !/chunked/i.test(parsed.headers['transfer-encoding'] ?? ''));
      if (!complete && !problem) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ status: parsed.status, headers: parsed.headers, body: parsed.body, ...(!complete && { problem }) });
    };
    const timer = setTimeout(() => finish(`no complete answer within ${timeoutMs} ms`), timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      finish();
    });
    socket.on('error', (e: NodeJS.ErrnoException) => finish(`socket error ${e.code ?? e.message}`, true));
    socket.on('close', () => finish('connection closed', true));
    socket.on('connect', () =>
      socket.write(bytes, () => {
        /* the server may answer and close before all is written */
      }),
    );
  });
}

interface Parsed {
  complete: boolean;
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

function parseAnswer(data: Buffer): Parsed {
  const empty = { complete: false, status: 0, headers: {}, body: Buffer.alloc(0) };
  const end = data.indexOf('\r\n\r\n');
  if (end < 0) return empty;
  const lines = data.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/\d(?:\.\d)? (\d{3})/.exec(lines[0])?.[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  }
  const rest = data.subarray(end + 4);
  if (headers['content-length'] !== undefined) {
    const length = Number(headers['content-length']);
    return { complete: rest.length >= length, status, headers, body: rest.subarray(0, length) };
  }
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    const chunks: Buffer[] = [];
    let at = 0;
    for (;;) {
      const lineEnd = rest.indexOf('\r\n', at);
      if (lineEnd < 0) return { complete: false, status, headers, body: Buffer.concat(chunks) };
      const size = parseInt(rest.subarray(at, lineEnd).toString('latin1'), 16);
      if (!Number.isFinite(size)) return { complete: true, status, headers, body: Buffer.concat(chunks) };
      if (size === 0) return { complete: true, status, headers, body: Buffer.concat(chunks) };
      if (rest.length < lineEnd + 2 + size + 2)
        return { complete: false, status, headers, body: Buffer.concat(chunks) };
      chunks.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
  }
  // Neither length nor chunks: 204/304 have no body; otherwise the body ends when the server closes.
  return { complete: status === 204 || status === 304, status, headers, body: rest };
}
