import { open, truncate } from 'node:fs/promises';

/** A media playlist nginx answered from a session's link (hls-playlist-config.ts's log line). */
export interface PlaylistFetch {
  at: number;
  token: string;
  serviceId: string;
  status: number;
  bytes: number;
  etag: string;
}

/** Once read this far, the log starts again from nothing (nginx appends: its next line lands at the start). */
const TRUNCATE_AFTER_BYTES = 16 * 1024 * 1024;
const LINE = /^(\d+\.\d+) ([A-Za-z0-9_-]{38}) ([A-Za-z0-9_-]{8,120}) (\d{3}) (\d+) (\S+)$/;

/**
 * nginx's log of the playlists it answered, read in batches: each read returns the complete lines written since the
 * last. Presence and usage of the sessions nginx answers come from here.
 */
export class PlaylistFetchLog {
  private offset = 0;
  private partial = '';

  constructor(private readonly path: string) {}

  async read(): Promise<PlaylistFetch[]> {
    const file = await open(this.path, 'r').catch(() => undefined);
    if (!file) return [];
    let text = '';
    try {
      const { size } = await file.stat();
      if (size < this.offset) this.offset = 0;
      if (size > this.offset) {
        const buffer = Buffer.alloc(size - this.offset);
        const { bytesRead } = await file.read(buffer, 0, buffer.length, this.offset);
        this.offset += bytesRead;
        text = buffer.subarray(0, bytesRead).toString('utf8');
      }
    } finally {
      await file.close();
    }
    if (this.offset > TRUNCATE_AFTER_BYTES && !(this.partial + text).endsWith('\n')) return this.parse(text);
    const fetches = this.parse(text);
    if (this.offset > TRUNCATE_AFTER_BYTES) {
      await truncate(this.path, 0).catch(() => {});
      this.offset = 0;
    }
    return fetches;
  }

  private parse(text: string): PlaylistFetch[] {
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop() ?? '';
    const fetches: PlaylistFetch[] = [];
    for (const line of lines) {
      const m = LINE.exec(line);
      if (!m) continue;
      const [, msec, token, serviceId, status, bytes, etag] = m;
      fetches.push({
        at: Math.round(Number(msec) * 1000),
        token,
        serviceId,
        status: Number(status),
        bytes: Number(bytes),
        etag,
      });
    }
    return fetches;
  }
}
