/**
 * The HTTP/1.1 that Icecast (libcurl) and HAProxy's Lua client speak to the callback server, read by hand: a request
 * line, a few headers, a small form with a Content-Length or chunked, on connections kept open. node:http's request
 * and response objects cost more than the decision they carry; a burst of listeners is as many callbacks at once.
 * Anything else is malformed: the connection gets a 400 and is closed.
 */
export interface WireRequest {
  method: string;
  target: string;
  /** The Authorization header, '' when none. */
  authorization: string;
  body: Buffer;
  /** The client asked for the connection to end after this answer. */
  close: boolean;
}

export class WireError extends Error {}

const MAX_HEAD = 8 * 1024;
const REQUEST_LINE = /^([A-Z]{1,16}) (\S{1,2048}) HTTP\/1\.([01])$/;
const CHUNK_SIZE = /^([0-9a-fA-F]{1,6})(;.*)?$/;

interface Head {
  method: string;
  target: string;
  authorization: string;
  close: boolean;
  chunked: boolean;
  length: number;
}

/** Splits the bytes of one connection into requests, in order; throws WireError on anything malformed or too large. */
export class RequestReader {
  private buffered: Buffer = Buffer.alloc(0);

  constructor(private readonly maxBody: number) {}

  push(chunk: Buffer): WireRequest[] {
    this.buffered = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
    const out: WireRequest[] = [];
    for (;;) {
      const request = this.next();
      if (!request) return out;
      out.push(request);
    }
  }

  /** The first complete request of the buffer (removed from it), undefined until it is all in. */
  private next(): WireRequest | undefined {
    const end = this.buffered.indexOf('\r\n\r\n');
    if (end === -1) {
      if (this.buffered.length > MAX_HEAD) throw new WireError('request head too large');
      return undefined;
    }
    if (end > MAX_HEAD) throw new WireError('request head too large');
    const head = parseHead(this.buffered.toString('latin1', 0, end));
    const rest = this.buffered.subarray(end + 4);
    const body = head.chunked ? dechunk(rest, this.maxBody) : fixed(rest, head.length, this.maxBody);
    if (!body) return undefined;
    this.buffered = rest.subarray(body.used);
    const { method, target, authorization, close } = head;
    return { method, target, authorization, close, body: body.bytes };
  }
}

function parseHead(text: string): Head {
  const lines = text.split('\r\n');
  const line = REQUEST_LINE.exec(lines[0]);
  if (!line) throw new WireError('bad request line');
  const headers = new Map<string, string>();
  for (const header of lines.slice(1)) {
    const colon = header.indexOf(':');
    if (colon <= 0) throw new WireError('bad header line');
    const name = header.slice(0, colon).trim().toLowerCase();
    if (headers.has(name) && (name === 'content-length' || name === 'transfer-encoding'))
      throw new WireError(`repeated ${name}`);
    headers.set(name, header.slice(colon + 1).trim());
  }
  const encoding = headers.get('transfer-encoding');
  const length = headers.get('content-length');
  if (encoding !== undefined && (encoding.toLowerCase() !== 'chunked' || length !== undefined))
    throw new WireError('unsupported transfer-encoding');
  if (length !== undefined && !/^\d{1,9}$/.test(length)) throw new WireError('bad content-length');
  const connection = (headers.get('connection') ?? '').toLowerCase();
  return {
    method: line[1],
    target: line[2],
    authorization: headers.get('authorization') ?? '',
    close: line[3] === '0' ? !connection.includes('keep-alive') : connection.includes('close'),
    chunked: encoding !== undefined,
    length: Number(length ?? 0),
  };
}

function fixed(rest: Buffer, length: number, max: number): { bytes: Buffer; used: number } | undefined {
  if (length > max) throw new WireError('body too large');
  return rest.length < length ? undefined : { bytes: rest.subarray(0, length), used: length };
}

/** A chunked body and the bytes it took (trailers included), undefined until its last chunk is in. */
function dechunk(rest: Buffer, max: number): { bytes: Buffer; used: number } | undefined {
  const parts: Buffer[] = [];
  let size = 0;
  let at = 0;
  for (;;) {
    const eol = rest.indexOf('\r\n', at);
    if (eol === -1) return undefined;
    const sizeLine = CHUNK_SIZE.exec(rest.toString('latin1', at, eol));
    if (!sizeLine) throw new WireError('bad chunk size');
    const n = Number.parseInt(sizeLine[1], 16);
    if (n === 0) return trailersEnd(rest, eol + 2, parts);
    size += n;
    if (size > max) throw new WireError('body too large');
    if (rest.length < eol + 2 + n + 2) return undefined;
    if (rest[eol + 2 + n] !== 13 || rest[eol + 3 + n] !== 10) throw new WireError('bad chunk end');
    parts.push(rest.subarray(eol + 2, eol + 2 + n));
    at = eol + 2 + n + 2;
  }
}

function trailersEnd(rest: Buffer, from: number, parts: Buffer[]): { bytes: Buffer; used: number } | undefined {
  let at = from;
  for (;;) {
    const eol = rest.indexOf('\r\n', at);
    if (eol === -1) {
      if (rest.length - from > MAX_HEAD) throw new WireError('trailers too large');
      return undefined;
    }
    if (eol === at) return { bytes: Buffer.concat(parts), used: eol + 2 };
    at = eol + 2;
  }
}

const REASONS: Record<number, string> = {
  200: 'OK',
  400: 'Bad Request',
  401: 'Unauthorized',
  404: 'Not Found',
  500: 'Internal Server Error',
};

/** An answer without a body. */
export function wireResponse(status: number, headers: Record<string, string>, close: boolean): string {
  let text = `HTTP/1.1 ${status} ${REASONS[status] ?? 'Status'}\r\n`;
  for (const [name, value] of Object.entries(headers)) text += `${name}: ${value}\r\n`;
  return `${text}content-length: 0\r\n${close ? 'connection: close\r\n' : ''}\r\n`;
}
