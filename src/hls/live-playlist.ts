import { rename, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { publish, segmentNumbers } from './playlist.js';
import { PUBLISHED_PLAYLIST, type Rendition } from './rendition.js';

/** How long a playlist read from the rendition's file is answered before the file is read again. */
export const PLAYLIST_FRESH_MS = 250;

/** A rendition's media playlist as every session is answered it, built once per playlist ffmpeg writes. */
export interface PublishedPlaylist {
  /** ffmpeg's own text (segments under the names it wrote). */
  written: string;
  numbers: number[];
  /** What sessions are sent: segments under their published names, at the file server's address. */
  body: string;
  bodyBytes: number;
  /** Each listed segment's size in bytes (0 once gone before it was measured). */
  sizes: Map<number, number>;
  /** Each listed segment's tag (its published name). */
  tags: Map<number, string>;
  /** When it was written to PUBLISHED_PLAYLIST, and the ETag nginx answers it with; unset when not written. */
  writtenAt?: number;
  etag?: string;
}

/** Playlists written earlier that a fetch logged late may have been answered. */
const VERSIONS_KEPT = 8;

export interface PublishOptions {
  /** The tag of a segment's published name (signing.ts). */
  tagOf: (number: number) => Promise<string>;
  /** Where segment addresses start (the file server's directory of the rendition, or '' beside the playlist). */
  base: string;
  /** Whether the file server serves them: they are then linked under their published names first. */
  link: boolean;
  /** Whether the file server answers sessions' playlists too: each new one is then written to PUBLISHED_PLAYLIST. */
  write?: boolean;
}

/**
 * The rendition's media playlist, shared by its sessions: a live.m3u8 answer costs no file read, no signing and no
 * stat; the file is read again at most every PLAYLIST_FRESH_MS (a target duration is 4 s), and what it lists is
 * published (tags, links, sizes) once, when ffmpeg writes a new one.
 */
export class LivePlaylist {
  private current?: PublishedPlaylist;
  private readAt = 0;
  private reading?: Promise<PublishedPlaylist | undefined>;
  /** The playlists written, oldest first. */
  private readonly versions: PublishedPlaylist[] = [];

  constructor(
    private readonly rendition: Rendition,
    private readonly options: PublishOptions,
  ) {}

  /** The playlist once it lists a segment; undefined before (or while the source is away). */
  get(now = Date.now()): Promise<PublishedPlaylist | undefined> {
    if (this.current && now - this.readAt < PLAYLIST_FRESH_MS) return Promise.resolve(this.current);
    this.reading ??= this.read().finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  private async read(): Promise<PublishedPlaylist | undefined> {
    const startedAt = Date.now();
    const written = await this.rendition.playlist();
    if (!written) {
      this.current = undefined;
      return undefined;
    }
    // A playlist not yet written to its file (the directory was being renewed) is written again.
    const unwritten = this.options.write && this.current?.writtenAt === undefined;
    if (written !== this.current?.written || unwritten) this.current = await this.build(written);
    this.readAt = startedAt;
    return this.current;
  }

  private async build(written: string): Promise<PublishedPlaylist> {
    const { tagOf, base, link } = this.options;
    const numbers = segmentNumbers(written);
    // A segment still listed keeps the tag and size it was published with: only the new ones are signed and measured.
    const tags = new Map<number, string>();
    const sizes = new Map<number, number>();
    for (const n of numbers) {
      tags.set(n, this.current?.tags.get(n) ?? (await tagOf(n)));
      sizes.set(n, this.current?.sizes.get(n) ?? (await this.sizeOf(n)));
    }
    if (link) await this.rendition.published.publish(numbers, tags);
    const body = publish(written, tags, base);
    const published: PublishedPlaylist = { written, numbers, body, bodyBytes: Buffer.byteLength(body), sizes, tags };
    if (this.options.write) await this.writeFile(published).catch(() => {});
    return published;
  }

  /**
   * The playlist nginx answered a fetch with: by the ETag it logged, else the one written last before the fetch was
   * logged (what a session was given decides which segments it is counted).
   */
  answered(etag: string, at: number): PublishedPlaylist | undefined {
    const byTag = this.versions.findLast((v) => v.etag === etag);
    return byTag ?? this.versions.findLast((v) => (v.writtenAt ?? 0) <= at) ?? this.versions[0];
  }

  /** Written beside ffmpeg's, under a temporary name first: nginx opens either the old one or the new one. */
  private async writeFile(published: PublishedPlaylist): Promise<void> {
    const file = join(this.rendition.dir, PUBLISHED_PLAYLIST);
    const temporary = `${file}.tmp`;
    await writeFile(temporary, published.body, { mode: 0o644 });
    await rename(temporary, file);
    const written = await stat(file);
    published.writtenAt = Date.now();
    // nginx's ETag of a file: its modification time in seconds and its size, in hex.
    published.etag = `"${Math.floor(written.mtimeMs / 1000).toString(16)}-${written.size.toString(16)}"`;
    this.versions.push(published);
    if (this.versions.length > VERSIONS_KEPT) this.versions.shift();
  }

  /** A segment file's size; 0 once it is gone. */
  private async sizeOf(number: number): Promise<number> {
    return (await stat(join(this.rendition.dir, `seg${number}.ts`)).catch(() => undefined))?.size ?? 0;
  }
}
