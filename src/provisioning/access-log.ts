// Follows Icecast's access.log: one line per finished HTTP request, written when the client goes away.
// For a listener that line is the exact record of what it cost: bytes written to its socket
// (response headers included) and how long it stayed.
//
// Icecast 2.4.4 writes (query string removed from the path; `"`, `\` and non-ASCII bytes become `.`):
//   127.0.0.1 - - [21/Nov/2026:23:59:53 +0000] "GET /test-abc HTTP/1.1" 200 28244 "-" "agent" 3
//   127.0.0.1 - source [21/Nov/2026:23:59:23 +0000] "PUT /test-abc HTTP/1.1" 200 63 "-" "Lavf/59.27.100" 16
//
// The reader keeps a position (byte offset + the file's inode + a fingerprint of its first bytes) that the
// caller persists together with whatever it did with the entries; a reader started from that position
// yields every later line exactly once. It survives Icecast restarts (Icecast appends), truncation, and
// rotation by rename (Icecast's own `<logarchive>` rotation renames to access.log.YYYYMMDD_HHMMSS; the
// rest of the renamed file is drained before the new one is read).

import { createHash } from 'node:crypto';
import { open, readdir, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { parseMount } from './icecast-callbacks.js';
import { proxiedAgent } from './listener-end.js';

export interface AccessLogEntry {
  /** The request path without its query string, e.g. `/test-abc`. */
  mount: string;
  ip: string;
  /** HTTP Basic user the client sent (`source` for sources), null for `-`. */
  user: string | null;
  method: string;
  /** `listener` for GET, `source` for PUT/SOURCE, `other` for anything else (HEAD, OPTIONS…). */
  kind: 'listener' | 'source' | 'other';
  status: number;
  /** Bytes Icecast wrote to the socket, response headers included. */
  bytes: number;
  referer: string | null;
  userAgent: string;
  /** Whole seconds between connect and disconnect. */
  durationSeconds: number;
  /** When Icecast wrote the line, i.e. when the client went away (whole seconds). */
  endedAt: Date;
  /** Where the line starts in the file: with `inode`, a stable identity (an idempotency key for storage). */
  offset: number;
  inode: number | null;
}

/** What to persist to resume reading without losing or repeating a line. Plain JSON. */
export interface AccessLogPosition {
  offset: number;
  /** Inode of the file `offset` refers to; null when unknown (then the offset is trusted as is). */
  inode: number | null;
  /** sha256 (hex) of the file's first `headLength` bytes, to notice a truncated and regrown or replaced file. */
  headHash: string | null;
  headLength: number;
}

export interface AccessLogReaderOptions {
  path: string;
  /** A persisted position, or a bare byte offset into the current file. Default: the start of the file. */
  start?: AccessLogPosition | number;
  /** Which request paths are mounts. Default: valid mount paths except /admin… and *.xsl status pages. */
  isMount?: (path: string) => boolean;
  /** Also yield refused or failed requests (status outside 200–299). Default false. */
  includeFailed?: boolean;
  /** Also yield source lines (PUT/SOURCE). Default false: listeners (GET) only. */
  includeSources?: boolean;
  /** Bytes read per read() call at most (complete lines only). Default 4 MiB. */
  maxBytesPerRead?: number;
}

export interface AccessLogReadStats {
  /** Lines read but not yielded: malformed, not a mount, filtered out. */
  skipped: number;
  /** The file was renamed away (and its rest drained when it was found). */
  rotated: boolean;
  /** The file shrank or its first bytes changed: reading restarted at 0. */
  truncated: boolean;
  /** A rotated file could not be found to drain: lines after the old offset may be lost. */
  lostRotatedFile: boolean;
}

const HEAD_BYTES = 64;
const CHUNK_BYTES = 1024 * 1024;
const NEWLINE = 0x0a;

// ip user auth [date] "METHOD path protocol" status bytes "referer" "agent" duration
const LINE = /^(\S+) (\S+) (\S+) \[([^\]]+)\] "(\S+) (\S+)(?: [^"]*)?" (\d{3}) (\d+|-) "([^"]*)" "([^"]*)" (-?\d+)\s*$/;
const CLF_DATE = /^(\d{2})\/([A-Z][a-z]{2})\/(\d{4}):(\d{2}):(\d{2}):(\d{2}) ([+-])(\d{2})(\d{2})$/;
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** `21/Nov/2026:23:59:53 +0100` → Date; null when malformed. */
export function parseClfDate(text: string): Date | null {
  const m = CLF_DATE.exec(text);
  if (!m) return null;
  const month = MONTHS.indexOf(m[2]);
  if (month < 0) return null;
  const offsetMinutes = (m[7] === '-' ? -1 : 1) * (Number(m[8]) * 60 + Number(m[9]));
  const utc = Date.UTC(Number(m[3]), month, Number(m[1]), Number(m[4]), Number(m[5]), Number(m[6]));
  return new Date(utc - offsetMinutes * 60_000);
}

/** Valid mount paths, except admin requests and status pages. */
export function defaultIsMount(path: string): boolean {
  if (path === '/admin' || path.startsWith('/admin/') || path.startsWith('/admin.') || path.endsWith('.xsl'))
    return false;
  return parseMount(path) !== null && !path.includes('?');
}

/** One access-log line (without its newline), or null when it is not in Icecast's format. */
export function parseAccessLogLine(line: string): Omit<AccessLogEntry, 'offset' | 'inode'> | null {
  const m = LINE.exec(line);
  if (!m) return null;
  const [, ip, , user, date, method, rawPath, status, bytes, referer, userAgent, duration] = m;
  const endedAt = parseClfDate(date);
  if (!endedAt) return null;
  const q = rawPath.indexOf('?');
  const agent = proxiedAgent(userAgent);
  return {
    mount: q === -1 ? rawPath : rawPath.slice(0, q),
    ip,
    user: user === '-' ? (agent.user ?? null) : user,
    method,
    kind: method === 'GET' ? 'listener' : method === 'PUT' || method === 'SOURCE' ? 'source' : 'other',
    status: Number(status),
    bytes: bytes === '-' ? 0 : Number(bytes),
    referer: referer === '-' ? null : referer,
    userAgent: agent.userAgent,
    durationSeconds: Math.max(0, Number(duration)),
    endedAt,
  };
}

export class AccessLogReader {
  readonly path: string;
  private pos: AccessLogPosition;
  private readonly isMount: (path: string) => boolean;
  private readonly includeFailed: boolean;
  private readonly includeSources: boolean;
  private readonly maxBytes: number;
  private queue: Promise<unknown> = Promise.resolve();
  /** Totals since this reader was created. */
  readonly totals = { lines: 0, entries: 0, skipped: 0, rotations: 0, truncations: 0, lostRotatedFiles: 0 };
  /** Details of the last read() call. */
  last: AccessLogReadStats = { skipped: 0, rotated: false, truncated: false, lostRotatedFile: false };

  constructor(options: AccessLogReaderOptions) {
    this.path = options.path;
    const start = options.start;
    this.pos =
      typeof start === 'number' || start === undefined
        ? { offset: start ?? 0, inode: null, headHash: null, headLength: 0 }
        : { ...start };
    if (!Number.isSafeInteger(this.pos.offset) || this.pos.offset < 0)
      throw new Error(`invalid access log offset ${this.pos.offset}`);
    this.isMount = options.isMount ?? defaultIsMount;
    this.includeFailed = options.includeFailed ?? false;
    this.includeSources = options.includeSources ?? false;
    this.maxBytes = options.maxBytesPerRead ?? 4 * 1024 * 1024;
  }

  /** Byte offset of the next unread line in the file identified by `position.inode`. */
  get offset(): number {
    return this.pos.offset;
  }

  /** A copy to persist (after the entries read up to here have been dealt with). */
  get position(): AccessLogPosition {
    return { ...this.pos };
  }

  /**
   * Complete lines written since the last call (a line still being written stays for the next call).
   * Calls are serialized. A missing file yields nothing.
   */
  read(): Promise<AccessLogEntry[]> {
    const run = this.queue.then(() => this.readNow());
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async readNow(): Promise<AccessLogEntry[]> {
    const stats: AccessLogReadStats = { skipped: 0, rotated: false, truncated: false, lostRotatedFile: false };
    this.last = stats;
    const entries: AccessLogEntry[] = [];
    const current = await stat(this.path).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return null;
      throw error;
    });

    if (this.pos.inode !== null && current?.ino !== this.pos.inode) {
      // Renamed away (rotation) or deleted: finish the old file if we can find it, then start the new one at 0.
      const old = await this.findRotated(this.pos.inode);
      if (old) {
        await this.readFile(old, true, entries, stats);
        stats.rotated = true;
        this.totals.rotations++;
      } else if (current) {
        stats.lostRotatedFile = true;
        this.totals.lostRotatedFiles++;
      }
      if (!current) return entries; // not recreated yet: keep the old identity so a later call finds it again
      stats.rotated = true;
      this.pos = { offset: 0, inode: current.ino, headHash: null, headLength: 0 };
    }
    if (!current) return entries;
    if (this.pos.inode === null) this.pos.inode = current.ino;
    await this.readFile(this.path, false, entries, stats);
    return entries;
  }

  /** The renamed file in the same directory whose inode is `inode` (Icecast: access.log.20261121_235953). */
  private async findRotated(inode: number): Promise<string | null> {
    const dir = dirname(this.path);
    const prefix = `${basename(this.path)}.`;
    const names = await readdir(dir).catch(() => [] as string[]);
    for (const name of names) {
      if (!name.startsWith(prefix)) continue;
      const candidate = join(dir, name);
      const s = await stat(candidate).catch(() => null);
      if (s?.ino === inode && s.isFile()) return candidate;
    }
    return null;
  }

  /**
   * Reads complete lines from pos.offset of the file whose inode is pos.inode. A final file (rotated away)
   * also yields its unterminated last line, and is never re-read from 0.
   */
  private async readFile(
    path: string,
    final: boolean,
    entries: AccessLogEntry[],
    stats: AccessLogReadStats,
  ): Promise<void> {
    const handle = await open(path, 'r').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return null;
      throw error;
    });
    if (!handle) return;
    try {
      const { size, ino } = await handle.stat();
      if (ino !== this.pos.inode) return; // renamed between stat() and open(): the next call sorts it out
      if (size < this.pos.offset || !(await this.headMatches(handle, size))) {
        if (final) {
          stats.lostRotatedFile = true;
          this.totals.lostRotatedFiles++;
          return;
        }
        stats.truncated = true;
        this.totals.truncations++;
        this.pos = { ...this.pos, offset: 0, headHash: null, headLength: 0 };
      }
      let budget = this.maxBytes;
      while (this.pos.offset < size && budget > 0) {
        const length = Math.min(size - this.pos.offset, CHUNK_BYTES);
        const buffer = Buffer.alloc(length);
        const { bytesRead } = await handle.read(buffer, 0, length, this.pos.offset);
        if (bytesRead === 0) break;
        const chunk = buffer.subarray(0, bytesRead);
        const atEnd = this.pos.offset + bytesRead >= size;
        let consumed = 0;
        for (let i = chunk.indexOf(NEWLINE); i !== -1; i = chunk.indexOf(NEWLINE, consumed)) {
          this.take(chunk.subarray(consumed, i), this.pos.offset + consumed, entries, stats);
          consumed = i + 1;
        }
        if (consumed === 0 && bytesRead === CHUNK_BYTES) {
          // A whole chunk without a newline is not a line Icecast wrote: skip it rather than stall.
          stats.skipped++;
          this.totals.skipped++;
          consumed = bytesRead;
        } else if (final && atEnd && consumed < bytesRead) {
          this.take(chunk.subarray(consumed), this.pos.offset + consumed, entries, stats);
          consumed = bytesRead;
        }
        this.pos.offset += consumed;
        budget -= consumed;
        if (consumed < bytesRead && (atEnd || consumed === 0)) break; // the rest of a line is still being written
      }
      await this.updateHead(handle);
    } finally {
      await handle.close();
    }
  }

  private take(bytes: Buffer, offset: number, entries: AccessLogEntry[], stats: AccessLogReadStats): void {
    this.totals.lines++;
    const line = bytes.toString('latin1').replace(/\r$/, '');
    const parsed = parseAccessLogLine(line);
    const wanted =
      parsed !== null &&
      this.isMount(parsed.mount) &&
      (this.includeFailed || (parsed.status >= 200 && parsed.status < 300)) &&
      (parsed.kind === 'listener' || (this.includeSources && parsed.kind === 'source'));
    if (!wanted) {
      stats.skipped++;
      this.totals.skipped++;
      return;
    }
    this.totals.entries++;
    entries.push({ ...parsed, offset, inode: this.pos.inode });
  }

  private async headMatches(handle: Awaited<ReturnType<typeof open>>, size: number): Promise<boolean> {
    if (this.pos.headHash === null || this.pos.headLength === 0) return true;
    if (size < this.pos.headLength) return false;
    return (await this.hashHead(handle, this.pos.headLength)) === this.pos.headHash;
  }

  // The fingerprint covers the first bytes we have consumed (at most HEAD_BYTES), so it never depends on a
  // line still being written.
  private async updateHead(handle: Awaited<ReturnType<typeof open>>): Promise<void> {
    const length = Math.min(HEAD_BYTES, this.pos.offset);
    if (length === this.pos.headLength && this.pos.headHash !== null) return;
    if (length === 0) {
      this.pos.headHash = null;
      this.pos.headLength = 0;
      return;
    }
    this.pos.headHash = await this.hashHead(handle, length);
    this.pos.headLength = length;
  }

  private async hashHead(handle: Awaited<ReturnType<typeof open>>, length: number): Promise<string> {
    const buffer = Buffer.alloc(length);
    const { bytesRead } = await handle.read(buffer, 0, length, 0);
    return createHash('sha256').update(buffer.subarray(0, bytesRead)).digest('hex');
  }
}
