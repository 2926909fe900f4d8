import { spawnSync } from 'node:child_process';

/** A segment line of a media playlist (beside it, or at the segment server's address): its number. */
const SEGMENT = /(?:^|\/)seg(\d+)[^/]*\.ts$/;

export const segmentLines = (playlist: string) => playlist.split('\n').filter((line) => SEGMENT.test(line));

/**
 * An HLS player of one media playlist, as hls.js, Safari and ffmpeg play a live one: from its first playlist the last
 * three segments, then each new one once. `bytes` adds up the playlist and segment bodies it received.
 */
export class HlsPlayer {
  bytes = 0;
  segmentBytes = 0;
  answered = 0;
  /** The last playlist answered. */
  playlist = '';
  readonly refusals: { status: number; code?: string; retryable?: boolean }[] = [];
  readonly segments = new Set<number>();
  /** Who answered the last playlist: 'nginx' (from the session's link) or 'serve' (passed on, or serve's address). */
  servedBy?: string;
  private newest?: number;

  constructor(readonly mediaUrl: string) {}

  /** One reload of the playlist and the segments it gives; the status of the playlist's answer. */
  async poll(): Promise<number> {
    const response = await fetch(this.mediaUrl, { signal: AbortSignal.timeout(30_000) });
    const text = await response.text();
    if (response.status !== 200) {
      const error = JSON.parse(text).error;
      this.refusals.push({ status: response.status, code: error?.code, retryable: error?.retryable });
      return response.status;
    }
    this.answered++;
    this.servedBy = response.headers.get('x-hls-playlist-server') ?? 'serve';
    this.playlist = text;
    this.bytes += Buffer.byteLength(text);
    const listed = segmentLines(text).map((uri) => ({ uri, n: Number(SEGMENT.exec(uri)![1]) }));
    const newest = this.newest;
    const fresh = newest === undefined ? listed.slice(-3) : listed.filter((s) => s.n > newest);
    for (const { uri, n } of fresh) {
      const segment = await fetch(new URL(uri, this.mediaUrl), { signal: AbortSignal.timeout(30_000) });
      const body = Buffer.from(await segment.arrayBuffer());
      if (segment.status !== 200) throw new Error(`segment ${uri} answered ${segment.status}`);
      this.bytes += body.length;
      this.segmentBytes += body.length;
      this.segments.add(n);
    }
    if (listed.length) this.newest = Math.max(newest ?? 0, listed.at(-1)!.n);
    return 200;
  }
}

/** The media playlist's address named by a multivariant playlist. */
export function mediaUrlOf(master: string, masterUrl: string): string {
  return new URL(master.split('\n').find((line) => line.includes('live.m3u8?session='))!, masterUrl).href;
}

/** The name of the process listening on `url`'s port on this machine (ss), undefined when none is found. */
export function listeningProcess(url: string): string | undefined {
  const port = new URL(url).port;
  const ss = spawnSync('ss', ['-Htlnp', `sport = :${port}`], { encoding: 'utf8' });
  return /users:\(\("([^"]+)"/.exec(ss.stdout)?.[1];
}
