import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../log/index.js';
import { PublishedSegments } from './published-segments.js';
import { HLS_LIST_SIZE, HLS_SEGMENT_SECONDS, HLS_SEGMENTER_AGENT, HLS_SEGMENTER_USER } from './url.js';

export const MEDIA_PLAYLIST = 'live.m3u8';
/** The playlist as sessions are answered it (segments under their published names), written by live-playlist.ts. */
export const PUBLISHED_PLAYLIST = 'published.m3u8';

export interface RenditionSource {
  /** Icecast's loopback address, e.g. http://127.0.0.1:8000 */
  icecastUrl: string;
  mount: string;
  secret: string;
  bitrateKbps: number;
}

/**
 * One service's HLS rendition: reads its mount from Icecast as our own listener (recognised by the decider, not
 * counted), re-encodes to AAC and lets ffmpeg's HLS muxer keep a sliding playlist of ~4 s MPEG-TS segments in `dir`.
 * Reconnects while it is wanted: the mount may have no source yet, or its source may change.
 */
export class Rendition {
  private stopped = false;
  private request?: http.ClientRequest;
  private encoder?: ChildProcess;
  private readonly done: Promise<void>;
  private readonly wake = new AbortController();
  lastUsedAt = Date.now();
  /** Its segments under the names playlists give (for the file server). */
  readonly published: PublishedSegments;

  constructor(
    readonly dir: string,
    private readonly source: RenditionSource,
    private readonly log: Logger,
  ) {
    this.published = new PublishedSegments(dir);
    this.done = this.loop();
  }

  /** Bytes Icecast wrote to our connection so far (headers included, as Icecast counts them); 0 when not connected. */
  get bytesFromIcecast(): number {
    return this.request?.socket?.bytesRead ?? 0;
  }

  get mount(): string {
    return this.source.mount;
  }

  /** The media playlist once it lists a segment; undefined before (or while the source is away). */
  async playlist(): Promise<string | undefined> {
    const text = await readFile(join(this.dir, MEDIA_PLAYLIST), 'utf8').catch(() => undefined);
    return text?.includes('#EXTINF') ? text : undefined;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake.abort();
    this.request?.destroy();
    this.encoder?.kill('SIGKILL');
    await this.done;
    await rm(this.dir, { recursive: true, force: true });
  }

  private async loop(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      const began = Date.now();
      await this.session().catch((err) => this.log.debug?.({ err, mount: this.mount }, 'HLS segmenter session failed'));
      failures = Date.now() - began > 30_000 ? 0 : failures + 1;
      const delay = Math.min(10_000, 500 * 2 ** Math.min(failures, 5));
      await sleep(delay, undefined, { signal: this.wake.signal }).catch(() => {});
    }
  }

  /** One connection to the mount, piped into one ffmpeg, until either ends. */
  private async session(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
    await mkdir(this.dir, { recursive: true });
    const response = await this.connect();
    if (this.stopped || response.statusCode !== 200) {
      response.destroy();
      return;
    }
    const encoder = spawn('ffmpeg', this.encoderArgs(), { stdio: ['pipe', 'ignore', 'pipe'], detached: true });
    this.encoder = encoder;
    let errors = '';
    encoder.stderr!.on('data', (chunk: Buffer) => {
      errors = (errors + chunk.toString()).slice(-400);
    });
    encoder.stdin!.on('error', () => response.destroy());
    response.pipe(encoder.stdin!);
    const code = await new Promise<number | null>((resolve) => encoder.on('exit', (exitCode) => resolve(exitCode)));
    response.destroy();
    this.request = undefined;
    const said = errors.trim().split('\n').pop();
    if (!this.stopped) this.log.info({ mount: this.mount, code, ffmpeg: said }, 'HLS segmenter ended; reconnecting');
  }

  private connect(): Promise<http.IncomingMessage> {
    const url = new URL(this.source.mount, this.source.icecastUrl);
    const auth = `${HLS_SEGMENTER_USER}:${this.source.secret}`;
    return new Promise((resolve, reject) => {
      // agent: false, so the socket is ours alone and its bytesRead is this connection's.
      const request = http.get(url, { agent: false, auth, headers: { 'user-agent': HLS_SEGMENTER_AGENT } }, resolve);
      request.once('error', reject);
      this.request = request;
    });
  }

  private encoderArgs(): string[] {
    const kbps = Math.max(32, Math.min(256, this.source.bitrateKbps));
    return [
      '-nostdin',
      '-loglevel',
      'error',
      '-i',
      'pipe:0',
      '-vn',
      '-c:a',
      'aac',
      '-b:a',
      `${kbps}k`,
      '-f',
      'hls',
      '-hls_time',
      String(HLS_SEGMENT_SECONDS),
      '-hls_list_size',
      String(HLS_LIST_SIZE),
      // Segment numbers from the clock: a restarted segmenter never reuses a name a client may have cached.
      '-hls_start_number_source',
      'epoch',
      // omit_endlist: a source that leaves and comes back must not tell players the stream has ended.
      '-hls_flags',
      'delete_segments+temp_file+independent_segments+omit_endlist',
      '-hls_segment_filename',
      join(this.dir, 'seg%d.ts'),
      join(this.dir, MEDIA_PLAYLIST),
    ];
  }
}
