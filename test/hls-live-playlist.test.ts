import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { LivePlaylist, PLAYLIST_FRESH_MS } from '../src/hls/live-playlist.js';
import type { Rendition } from '../src/hls/rendition.js';

// A rendition's media playlist is read, signed, linked and measured once per playlist ffmpeg writes, and shared by
// every session's answer: a burst of answers reads the file once, a new playlist shows within PLAYLIST_FRESH_MS.

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hls-live-playlist-'));
});
after(() => rm(dir, { recursive: true, force: true }));

const playlistOf = (numbers: number[]) =>
  ['#EXTM3U', '#EXT-X-TARGETDURATION:4', ...numbers.flatMap((n) => ['#EXTINF:4.0,', `seg${n}.ts`]), ''].join('\n');

/** A rendition as LivePlaylist uses one, counting its playlist reads and publications. */
function fakeRendition(text: () => string | undefined) {
  const counts = { reads: 0, publications: 0 };
  const rendition = {
    dir,
    published: {
      publish: async () => {
        counts.publications++;
      },
    },
    playlist: async () => {
      counts.reads++;
      return text();
    },
  };
  return { rendition: rendition as unknown as Rendition, counts };
}

test('one read, signing and publication per playlist written, shared by every answer', async () => {
  let numbers = [10, 11, 12];
  for (const n of [10, 11, 12, 13]) await writeFile(join(dir, `seg${n}.ts`), Buffer.alloc(1000 + n));
  const { rendition, counts } = fakeRendition(() => playlistOf(numbers));
  const tagged: number[] = [];
  const live = new LivePlaylist(rendition, {
    tagOf: async (n) => {
      tagged.push(n);
      return `tag${String(n).padStart(9, '0')}`;
    },
    base: 'http://segments.example/hls/svc/',
    link: true,
  });
  const answers = await Promise.all(Array.from({ length: 200 }, () => live.get()));
  assert.equal(counts.reads, 1, 'a burst of answers reads the file once');
  assert.equal(counts.publications, 1);
  assert.deepEqual(tagged, [10, 11, 12]);
  for (const a of answers) assert.equal(a, answers[0]);
  const first = answers[0]!;
  assert.deepEqual(first.numbers, [10, 11, 12]);
  assert.match(first.body, /^http:\/\/segments\.example\/hls\/svc\/seg12-tag000000012\.ts$/m);
  assert.doesNotMatch(first.body, /^seg\d+\.ts$/m);
  assert.equal(first.bodyBytes, Buffer.byteLength(first.body));
  assert.deepEqual(
    [...first.sizes],
    [
      [10, 1010],
      [11, 1011],
      [12, 1012],
    ],
  );

  // ffmpeg writes the next playlist: answered from the old one until it is PLAYLIST_FRESH_MS old, then the new one,
  // with only the new segment signed and measured (segment 10's file is gone: its size was kept).
  numbers = [11, 12, 13];
  await rm(join(dir, 'seg11.ts'));
  assert.equal(await live.get(), first);
  await sleep(PLAYLIST_FRESH_MS + 50);
  const second = (await live.get())!;
  assert.deepEqual(second.numbers, [11, 12, 13]);
  assert.deepEqual(tagged, [10, 11, 12, 13]);
  assert.deepEqual(
    [...second.sizes],
    [
      [11, 1011],
      [12, 1012],
      [13, 1013],
    ],
  );
  assert.equal(counts.reads, 2);
  assert.equal(counts.publications, 2);

  // The same text read again is not published again.
  await sleep(PLAYLIST_FRESH_MS + 50);
  assert.equal(await live.get(), second);
  assert.equal(counts.reads, 3);
  assert.equal(counts.publications, 2);
});

test('no playlist until it lists a segment, and none while the source is away', async () => {
  let text: string | undefined;
  const { rendition, counts } = fakeRendition(() => text);
  const live = new LivePlaylist(rendition, { tagOf: async () => 'x'.repeat(12), base: '', link: false });
  assert.equal(await live.get(), undefined);
  assert.equal(await live.get(), undefined);
  assert.equal(counts.reads, 2, 'nothing is kept while there is no playlist');
  text = playlistOf([5]);
  assert.deepEqual((await live.get())?.numbers, [5]);
  assert.equal(counts.publications, 0, 'nothing linked without a file server');
  text = undefined;
  await sleep(PLAYLIST_FRESH_MS + 50);
  assert.equal(await live.get(), undefined);
});
