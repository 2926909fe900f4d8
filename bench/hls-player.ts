/**
 * An HLS player as the benchmarks model one (bench/hls.ts, bench/hls-players.ts): its session's playlist every 2 s
 * (half the target duration); from the first the last three segments (as hls.js starts), then each new segment once.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { type RawAnswer, RawHttp } from './raw-http.js';

/** A segment line of a media playlist (an address at nginx, or beside the playlist without it): its number. */
export const SEGMENT = /(?:^|\/)seg(\d+)-[^/]*\.ts$/;

/** Refusals seen in this process, by status and error code: the first of each kind is printed. */
const refusalsSeen = new Set<string>();
function noteRefusal(status: number, body: string): void {
  const kind = `${status} ${body.match(/"code":"([^"]+)"/)?.[1] ?? body.slice(0, 60)}`;
  if (refusalsSeen.has(kind)) return;
  refusalsSeen.add(kind);
  console.error(`[hls-player] first refusal of its kind: ${kind}: ${body.slice(0, 300)}`);
}

export class Player {
  readonly fetched = new Set<number>();
  bytes = 0;
  failures = 0;
  retries = 0;
  /** Media playlists refused with a retryable error (a busy machine's 503, a 429 to wait). */
  refused = 0;
  /** Media playlists answered 200. */
  playlists = 0;
  lastSegment?: string;
  private media?: URL;
  /** One kept connection per server (nginx, a CDN edge), as a player keeps its own. */
  private readonly connections = new Map<string, RawHttp>();
  /** `segmentVia` maps a segment's address (nginx's) to where this player fetches it (a CDN edge in front). */
  constructor(
    private readonly master: string,
    private readonly segmentVia: (url: URL) => URL = (url) => url,
  ) {}

  /** Plays until `until` (ms since the epoch, or read again at each reload). */
  async run(until: number | (() => number)): Promise<void> {
    try {
      await this.play(typeof until === 'number' ? () => until : until);
    } finally {
      for (const connection of this.connections.values()) connection.close();
    }
  }

  private async play(end: () => number): Promise<void> {
    const text = (await this.get(new URL(this.master))).body.toString();
    this.media = new URL(text.split('\n').find((l) => l.includes('live.m3u8?session='))!, this.master);
    // As players do, a retryable refusal (a burst of admissions on a loaded machine) is tried again.
    for (let tries = 0; !(await this.poll().catch(() => false)) && tries < 20; tries++) {
      this.retries++;
      await sleep(500 + Math.random() * 1000);
    }
    await sleep(Math.random() * 2000);
    while (Date.now() < end()) {
      await this.poll().catch(() => {
        this.failures++;
      });
      await sleep(2000);
    }
  }

  private async poll(): Promise<boolean> {
    const answer = await this.get(this.media!);
    const playlist = answer.body.toString();
    if (answer.status !== 200) {
      this.refused++;
      noteRefusal(answer.status, playlist);
      if (JSON.parse(playlist).error?.retryable) return false;
      throw new Error(`live.m3u8 answered ${answer.status}: ${playlist}`);
    }
    this.playlists++;
    const segments = playlist.split('\n').filter((l) => SEGMENT.test(l));
    for (const uri of this.fetched.size ? segments : segments.slice(-3)) {
      const number = Number(SEGMENT.exec(uri)![1]);
      if (this.fetched.has(number)) continue;
      const answer = await this.get(this.segmentVia(new URL(uri, this.media!)));
      if (answer.status !== 200) throw new Error(`segment ${uri} answered ${answer.status}`);
      this.bytes += answer.body.length;
      this.fetched.add(number);
      this.lastSegment = new URL(uri, this.media!).href;
    }
    return true;
  }

  private get(url: URL): Promise<RawAnswer> {
    let connection = this.connections.get(url.host);
    if (!connection) {
      connection = new RawHttp(url.hostname, Number(url.port || 80));
      this.connections.set(url.host, connection);
    }
    return connection.get(url.pathname + url.search);
  }
}
