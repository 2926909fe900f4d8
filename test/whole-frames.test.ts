import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { wholeFramesEnd } from '../src/recordings/whole-frames.js';
import { lavfi } from './support/tones.js';
import { requireStreamingTools } from './support/system-tools.js';

// A show over two hosts is joined from the part the lost host wrote and the next host's part. The lost host's capture
// can end inside a frame: joined as it is, the torn frame broke decoding there (ffmpeg's clock jumped 13 s on a show
// of 9). Each format we record, cut at many places, is joined at its last whole frame and must decode cleanly.
requireStreamingTools(['ffmpeg']);

/** MP3 as a capture writes it: frames only, no tag or header frame before them. */
const CAPTURED_MP3 = ['-f', 'mp3', '-write_xing', '0', '-id3v2_version', '0'];
const FORMATS = [
  {
    name: 'MP3 (MPEG-1 layer III)',
    extension: 'mp3',
    encoding: ['-c:a', 'libmp3lame', '-b:a', '64k', ...CAPTURED_MP3],
    largestFrame: 1_441,
  },
  {
    name: 'MP3 (MPEG-2 layer III, 22.05 kHz)',
    extension: 'mp3',
    encoding: ['-c:a', 'libmp3lame', '-b:a', '32k', '-ar', '22050', ...CAPTURED_MP3],
    largestFrame: 1_441,
  },
  {
    name: 'MP2 (layer II)',
    extension: 'mp3',
    encoding: ['-c:a', 'mp2', '-b:a', '128k', '-f', 'mp2'],
    largestFrame: 1_441,
  },
  { name: 'AAC (ADTS)', extension: 'aac', encoding: ['-c:a', 'aac', '-b:a', '64k', '-f', 'adts'], largestFrame: 8_191 },
  {
    name: 'Opus (Ogg)',
    extension: 'ogg',
    encoding: ['-c:a', 'libopus', '-b:a', '64k', '-f', 'ogg'],
    largestFrame: 65_307,
  },
];
/** Where the lost host's part is cut: at odd places inside its frames, and once at its very end. */
const CUTS = [1_001, 4_099, 9_500, 15_003];

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'whole-frames-'));
});
after(() => rm(dir, { recursive: true, force: true }));

/** What ffmpeg reports decoding `file` (nothing for audio that decodes cleanly). */
function decodeErrors(file: string): Promise<string> {
  return new Promise((resolve) => {
    execFile('ffmpeg', ['-nostdin', '-v', 'error', '-i', file, '-f', 'null', '-'], (_err, _out, log) =>
      resolve(String(log).trim()),
    );
  });
}

for (const format of FORMATS) {
  test(`${format.name}: a part cut inside a frame is joined at its last whole frame`, async () => {
    const audio = await lavfi('sine=frequency=440:duration=3', format.encoding);
    // The next host's part: a capture of its own (an Ogg stream of its own serial number).
    const next = await lavfi('sine=frequency=660:duration=2', format.encoding);
    const part = join(dir, `part.${format.extension}`);
    await writeFile(part, audio);
    let tornJoinBroke = false;
    for (const cut of [...CUTS.filter((c) => c < audio.length), audio.length]) {
      const end = await wholeFramesEnd(part, cut, format.extension);
      assert.ok(end <= cut && cut - end <= format.largestFrame, `${cut} bytes kept up to ${end}`);
      assert.equal(await wholeFramesEnd(part, end, format.extension), end, 'a part ending with a whole frame is kept');
      if (cut === audio.length) assert.equal(end, cut, 'a whole file is kept whole');
      const joined = join(dir, `joined.${format.extension}`);
      await writeFile(joined, Buffer.concat([audio.subarray(0, end), next]));
      assert.equal(await decodeErrors(joined), '', `cut at ${cut}, joined at ${end}`);
      if (!tornJoinBroke) await writeFile(joined, Buffer.concat([audio.subarray(0, cut), next]));
      if (!tornJoinBroke && end !== cut) tornJoinBroke = (await decodeErrors(joined)) !== '';
    }
    // The same parts joined where they were cut do not decode cleanly: what the cut at whole frames prevents.
    assert.ok(tornJoinBroke, 'a torn frame breaks the join');
  });
}

test('a long part is cut at its last whole frame, found in its tail', async () => {
  for (const format of [FORMATS[0], FORMATS[4]]) {
    const audio = await lavfi('sine=frequency=440:duration=90', format.encoding);
    assert.ok(audio.length > 600_000, `${format.name}: ${audio.length} bytes, longer than the tail looked at`);
    const part = join(dir, `long.${format.extension}`);
    await writeFile(part, audio);
    const cut = audio.length - 5_003;
    const end = await wholeFramesEnd(part, cut, format.extension);
    assert.ok(end < cut && cut - end <= format.largestFrame, `${format.name}: ${cut} bytes kept up to ${end}`);
    const joined = join(dir, `long-joined.${format.extension}`);
    await writeFile(joined, Buffer.concat([audio.subarray(0, end), await lavfi('sine=duration=1', format.encoding)]));
    assert.equal(await decodeErrors(joined), '', format.name);
  }
});

test('a file of a format not known is kept whole, and so is one with no frames', async () => {
  const part = join(dir, 'noise.mp3');
  await writeFile(part, Buffer.alloc(10_000, 0x55));
  assert.equal(await wholeFramesEnd(part, 10_000, 'mp3'), 10_000);
  assert.equal(await wholeFramesEnd(part, 10_000, 'flac'), 10_000);
});
