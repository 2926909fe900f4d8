// What an audio check costs, old way (ffprobe, then decode it whole) vs now (ffprobe, header refusal, a read through
// without decoding, windows), against a 20 s MP3 measured in the same run: `npx tsx bench/audio-checks.ts`.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MediaLibrary } from '../src/services/media-library.js';
import { flacSilence } from '../test/support/tones.js';

const dir = mkdtempSync(join(tmpdir(), 'audio-checks-'));
const make = (name: string, args: string[]) => {
  execFileSync('ffmpeg', ['-v', 'error', ...args, '-y', join(dir, name)]);
  return join(dir, name);
};
const files = {
  'song 20 s MP3 (baseline)': make('song.mp3', ['-f', 'lavfi', '-i', 'sine=frequency=440:duration=20', '-b:a', '128k']),
  '24 h stereo 48 kHz FLAC silence, 9 MB': (() => {
    const path = join(dir, 'day.flac');
    writeFileSync(path, flacSilence({ seconds: 86_400, rate: 48_000, channels: 2, sizeBytes: 9_000_000 }));
    return path;
  })(),
  '60 s 7.1 192 kHz FLAC silence (the attack, 1/1200 of its 20 h)': make('wide.flac', [
    '-f',
    'lavfi',
    '-i',
    'anullsrc=r=192000:cl=7.1',
    '-t',
    '60',
    '-c:a',
    'flac',
    '-frame_size',
    '65535',
  ]),
};
const lib = new MediaLibrary(null as never, dir, {
  idleTimeoutMs: 1,
  perService: 1,
  probeConcurrency: 1,
  probeQueue: 1,
  probeWaitMs: 1,
  probeLargeBytes: 1,
  probeTimeoutMs: 120_000,
  decodeBaseMs: 120_000,
  reservationLeaseMs: 1000,
});
const oldCheck = (path: string) => {
  for (const args of [
    ['ffprobe', '-v', 'error', '-i', path, '-show_streams', '-show_format', '-of', 'json'],
    ['ffmpeg', '-nostdin', '-v', 'error', '-i', path, '-map', '0:a:0', '-t', '86401', '-f', 'null', '-'],
  ])
    spawnSync(args[0], args.slice(1));
};
const newCheck = (path: string) =>
  (lib as unknown as { probe(p: string, s: number, b: number): Promise<unknown> })
    .probe(path, statSync(path).size, 86_400)
    .catch((e: { code?: string }) => e.code);
const time = async (f: () => unknown) => {
  const start = performance.now();
  const result = await f();
  return { ms: performance.now() - start, result };
};
const rounds = 3;
const results: Record<string, { old: number[]; now: number[]; outcome: unknown }> = {};
for (let r = 0; r < rounds; r++)
  for (const [name, path] of Object.entries(files)) {
    const entry = (results[name] ??= { old: [], now: [], outcome: undefined });
    entry.old.push((await time(() => oldCheck(path))).ms);
    const now = await time(() => newCheck(path));
    entry.now.push(now.ms);
    entry.outcome = typeof now.result === 'string' ? now.result : 'accepted';
  }
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const base = median(results['song 20 s MP3 (baseline)'].now);
console.log(`median of ${rounds}; ratios to the baseline's check now (${Math.round(base)} ms)`);
for (const [name, { old, now, outcome }] of Object.entries(results))
  console.log(
    `${name}: old ${Math.round(median(old))} ms (${(median(old) / base).toFixed(1)}x), now ${Math.round(median(now))} ms (${(median(now) / base).toFixed(1)}x), ${outcome}`,
  );
rmSync(dir, { recursive: true, force: true });
