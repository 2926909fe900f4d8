import { link, unlink } from 'node:fs/promises';
import { join } from 'node:path';

/** Segments that left the playlist stay this many more under their published name (a player may still be on one). */
const KEPT_AFTER_PLAYLIST = 3;

/**
 * A rendition's segments under their published names (seg<N>-<tag>.ts), hard links beside the files ffmpeg writes
 * (seg<N>.ts) in the same directory, so that the file server serves a segment only by the name a playlist gave:
 * the tag is signed, and the number alone reaches nothing. Linked when a playlist first lists a segment, unlinked a
 * few segments after it left the playlist (ffmpeg deletes its own name meanwhile).
 */
export class PublishedSegments {
  private readonly linked = new Map<number, Promise<string>>();

  constructor(private readonly dir: string) {}

  /** Links each listed segment under its published name (once), and unlinks those long gone from the playlist. */
  async publish(numbers: number[], tags: Map<number, string>): Promise<void> {
    if (!numbers.length) return;
    await Promise.all(numbers.map((n) => this.linkOnce(n, tags.get(n)!)));
    const oldest = Math.min(...numbers);
    const gone = [...this.linked.keys()].filter((n) => n < oldest - KEPT_AFTER_PLAYLIST);
    await Promise.all(gone.map((n) => this.unlinkOne(n)));
  }

  private linkOnce(number: number, tag: string): Promise<string> {
    let done = this.linked.get(number);
    if (!done) {
      const name = `seg${number}-${tag}.ts`;
      done = link(join(this.dir, `seg${number}.ts`), join(this.dir, name)).then(
        () => name,
        (err: NodeJS.ErrnoException) => {
          if (err.code === 'EEXIST') return name;
          // Not linked (ffmpeg deleted it first, or the directory was renewed): tried again by the next playlist.
          this.linked.delete(number);
          return name;
        },
      );
      this.linked.set(number, done);
    }
    return done;
  }

  private async unlinkOne(number: number): Promise<void> {
    const name = await this.linked.get(number);
    this.linked.delete(number);
    if (name) await unlink(join(this.dir, name)).catch(() => {});
  }
}
