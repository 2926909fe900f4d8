import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/** What ffmpeg writes to its standard output with these arguments; it runs without blocking the test process. */
export async function ffmpegOutput(args: string[]): Promise<Buffer> {
  const { stdout } = await execFileAsync('ffmpeg', ['-v', 'error', ...args], {
    encoding: 'buffer',
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout;
}

/** A tone of `seconds` made by ffmpeg, tagged with this title (artist "Test Band"), encoded as `encoding` says. */
export function tone(seconds: number, title: string, encoding: string[]): Promise<Buffer> {
  return sine({ seconds, frequency: 523, tags: { title, artist: 'Test Band' } }, encoding);
}

/** A square PNG of `side` px drawn by ffmpeg (its test pattern unless `source` names another lavfi source). */
export function picture(side: number, source = 'testsrc'): Promise<Buffer> {
  return stillImage(`${source}=size=${side}x${side}`);
}

/**
 * A 64 kbps MP3 tone of `seconds` tagged with this title (artist "Test Band"), carrying `cover` (PNG or JPEG bytes)
 * as its front cover in an ID3 APIC frame. Written to a file: ffmpeg's MP3 muxer writes no readable picture to a pipe.
 */
export async function mp3WithCover(seconds: number, title: string, cover: Buffer): Promise<Buffer> {
  const dir = await mkdtemp(join(tmpdir(), 'mp3-cover-'));
  try {
    await writeFile(join(dir, 'cover'), cover);
    const input = ['-f', 'lavfi', '-i', `sine=frequency=523:duration=${seconds}`, '-i', join(dir, 'cover')];
    const tags = [
      '-metadata',
      `title=${title}`,
      '-metadata',
      'artist=Test Band',
      '-metadata:s:v',
      'comment=Cover (front)',
    ];
    const streams = ['-map', '0:a', '-map', '1:v', '-c:a', 'libmp3lame', '-b:a', '64k', '-c:v', 'copy'];
    await ffmpegOutput([...input, ...streams, '-disposition:v', 'attached_pic', ...tags, join(dir, 'out.mp3')]);
    return await readFile(join(dir, 'out.mp3'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A live source: a tone of `seconds` sent as 64 kbps MP3 at the pace of playback to `url`, then it hangs up. */
export function liveToneSource(url: string, seconds: number, frequency = 440): ChildProcess {
  return liveSine(url, { seconds, frequency });
}

/**
 * What an ffmpeg lavfi source gives (e.g. `anullsrc=r=48000:cl=stereo` with `-t 4` in `encoding`), encoded as
 * `encoding` says, written to `output` (its bytes are returned when that is the standard output).
 */
export function lavfi(source: string, encoding: string[], output = 'pipe:1'): Promise<Buffer> {
  return ffmpegOutput(['-f', 'lavfi', '-i', source, ...encoding, output]);
}

/** ffmpeg's output options for MP3 at `kbps` (the format named, so that it can go to a pipe). */
export function mp3(kbps = 64): string[] {
  return ['-c:a', 'libmp3lame', '-b:a', `${kbps}k`, '-f', 'mp3'];
}

/** What a sine is made of: its pitch, its length and the tags written with it. */
export interface Sine {
  seconds: number;
  frequency?: number;
  tags?: Record<string, string>;
}

/**
 * A sine of `seconds` at `frequency` Hz (440 unless given) made by ffmpeg with these tags, encoded as `encoding` says,
 * written to `output` (its bytes are returned when that is the standard output).
 */
export function sine(what: Sine, encoding: string[], output = 'pipe:1'): Promise<Buffer> {
  const tags = Object.entries(what.tags ?? {}).flatMap(([key, value]) => ['-metadata', `${key}=${value}`]);
  return lavfi(`sine=frequency=${what.frequency ?? 440}:duration=${what.seconds}`, [...tags, ...encoding], output);
}

/** A still image from an ffmpeg video source (e.g. `color=c=blue:s=32x32`), a PNG unless `encoding` says otherwise. */
export function stillImage(source: string, encoding = ['-c:v', 'png', '-f', 'image2pipe']): Promise<Buffer> {
  return lavfi(source, ['-frames:v', '1', ...encoding]);
}

/** How a live sine is sent: its pitch, length (endless unless given), bitrate, sample rate, options before the codec. */
export interface LiveSine {
  frequency?: number;
  seconds?: number;
  kbps?: number;
  sampleRate?: number;
  beforeCodec?: string[];
}

/** A live source: a sine sent as MP3 (64 kbps unless given) at the pace of playback to `url`, an Icecast source URL. */
export function liveSine(url: string, how: LiveSine = {}): ChildProcess {
  const length = how.seconds === undefined ? '' : `:d=${how.seconds}`;
  const input = [
    '-nostdin',
    '-loglevel',
    'error',
    '-re',
    '-f',
    'lavfi',
    '-i',
    `sine=frequency=${how.frequency ?? 440}${length}`,
  ];
  const rate = how.sampleRate === undefined ? [] : ['-ar', String(how.sampleRate)];
  const codec = ['-c:a', 'libmp3lame', '-b:a', `${how.kbps ?? 64}k`, ...rate];
  const encode = [...(how.beforeCodec ?? []), ...codec, '-content_type', 'audio/mpeg', '-f', 'mp3', url];
  return spawn('ffmpeg', [...input, ...encode], { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Samples a second that MP3 bytes are decoded to when their playing time is counted. */
const COUNTED_RATE = 8000;

/**
 * The playing time of MP3 bytes: the samples ffmpeg decodes from them, counted (not its clock, which a broken frame
 * makes jump). Bytes that do not decode cleanly — a torn frame, a missing header — are refused with ffmpeg's words.
 */
export function mp3Seconds(bytes: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const args = ['-v', 'error', '-f', 'mp3', '-i', 'pipe:0', '-ac', '1', '-ar', String(COUNTED_RATE), '-f', 's16le'];
    const child = execFile(
      'ffmpeg',
      [...args, 'pipe:1'],
      { encoding: 'buffer', maxBuffer: 1 << 30 },
      (err, pcm, log) => {
        if (err) return reject(err);
        const errors = String(log).trim();
        if (errors) return reject(new Error(`the MP3 does not decode cleanly: ${errors.slice(0, 500)}`));
        resolve(pcm.length / 2 / COUNTED_RATE);
      },
    );
    child.stdin!.end(bytes);
  });
}

/** The playing time of audio bytes in any container ffmpeg recognises (Ogg, say), decoded to the end. */
export async function decodedSeconds(bytes: Buffer): Promise<number> {
  const child = execFile('ffmpeg', ['-v', 'error', '-i', 'pipe:0', '-f', 'null', '-progress', 'pipe:1', '-']);
  let out = '';
  child.stdout!.on('data', (chunk) => {
    out += chunk;
  });
  const closed = new Promise((resolve, reject) => child.on('close', resolve).on('error', reject));
  child.stdin!.end(bytes);
  await closed;
  const times = [...out.matchAll(/^out_time_us=(\d+)$/gm)].map((m) => Number(m[1]));
  return times[times.length - 1] / 1e6;
}

/** The playing time of the MP3 file at `url`. */
export async function playedSeconds(url: string): Promise<number> {
  return mp3Seconds(Buffer.from(await (await fetch(url, { signal: AbortSignal.timeout(30_000) })).arrayBuffer()));
}

const crcTables = new Map<string, Uint16Array>();

/** The CRC of every byte value, so that hours of frames are summed a byte, not a bit, at a time. */
function crcTable(width: 8 | 16, poly: number): Uint16Array {
  const key = `${width}:${poly}`;
  let table = crcTables.get(key);
  if (table) return table;
  const top = 1 << (width - 1);
  const mask = (1 << width) - 1;
  table = new Uint16Array(256);
  for (let byte = 0; byte < 256; byte++) {
    let value = byte << (width - 8);
    for (let bit = 0; bit < 8; bit++) value = value & top ? ((value << 1) ^ poly) & mask : (value << 1) & mask;
    table[byte] = value;
  }
  crcTables.set(key, table);
  return table;
}

/** CRC-8 (poly 0x07) of a FLAC frame header and CRC-16 (poly 0x8005) of a whole frame. */
function crc(bytes: Buffer, width: 8 | 16, poly: number): number {
  const table = crcTable(width, poly);
  const mask = (1 << width) - 1;
  let value = 0;
  for (let i = 0; i < bytes.length; i++)
    value = ((value << 8) & mask) ^ table[((value >> (width - 8)) ^ bytes[i]) & 0xff];
  return value;
}

/** A FLAC frame number, UTF-8 coded as the format wants. */
function utf8Number(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  let rest = n;
  while (rest >= 1 << (6 - bytes.length)) {
    bytes.unshift(0x80 | (rest & 0x3f));
    rest = Math.floor(rest / 64);
  }
  const lead = (0xff << (7 - bytes.length)) & 0xff;
  return Buffer.from([lead | rest, ...bytes]);
}

/**
 * Silence as a FLAC of `seconds` at 8, 16, 44.1, 48, 96 or 192 kHz with 1 to 8 channels, written directly (constant
 * subframes in the largest blocks: about 18 bytes a frame in stereo), so hours take a fraction of a second to make;
 * `sizeBytes` pads it with PADDING metadata blocks to that size. Its frame numbers and total length are right: it plays
 * for `seconds`.
 */
export function flacSilence(options: { seconds: number; rate: number; channels: number; sizeBytes?: number }): Buffer {
  const rateCode = { 8000: 4, 16000: 5, 44100: 9, 48000: 10, 96000: 11, 192000: 3 }[options.rate];
  if (!rateCode) throw new Error(`flacSilence: no rate code for ${options.rate}`);
  const block = 65535;
  const total = Math.round(options.seconds * options.rate);
  const streamInfo = Buffer.alloc(34);
  streamInfo.writeUInt16BE(block, 0);
  streamInfo.writeUInt16BE(block, 2);
  // sample rate (20 bits), channels - 1 (3), bits per sample - 1 (5), total samples (36)
  const packed = (BigInt(options.rate) << 44n) | (BigInt(options.channels - 1) << 41n) | (15n << 36n) | BigInt(total);
  streamInfo.writeBigUInt64BE(packed, 10);
  // Written into one buffer: hours at 192 kHz are some 200,000 frames.
  const audio = Buffer.alloc(Math.ceil(total / block) * (15 + 3 * options.channels));
  let at = 0;
  for (let n = 0, done = 0; done < total; n++) {
    const size = Math.min(block, total - done);
    const start = at;
    audio.set([0xff, 0xf8, (7 << 4) | rateCode, ((options.channels - 1) << 4) | (4 << 1)], at);
    at += 4;
    const number = utf8Number(n);
    audio.set(number, at);
    at += number.length;
    audio.set([(size - 1) >> 8, (size - 1) & 0xff], at);
    at += 2;
    audio[at] = crc(audio.subarray(start, at), 8, 0x07);
    at += 1 + 3 * options.channels;
    audio.writeUInt16BE(crc(audio.subarray(start, at), 16, 0x8005), at);
    at += 2;
    done += size;
  }
  const blocks = [Buffer.from([0x00, 0, 0, 34]), streamInfo];
  // A metadata block holds less than 16 MB: more padding goes in several blocks, each with its 4-byte header.
  const most = (1 << 24) - 1;
  let padding = (options.sizeBytes ?? 0) - (4 + 38 + at + 4);
  while (padding > 0) {
    const size = padding > most ? Math.min(most, padding - 8) : padding;
    const last = size === padding ? 0x80 : 0;
    blocks.push(Buffer.from([last | 1, size >> 16, (size >> 8) & 0xff, size & 0xff]), Buffer.alloc(size));
    padding -= size + 4;
  }
  if (blocks.length === 2) blocks[0][0] = 0x80;
  return Buffer.concat([Buffer.from('fLaC', 'latin1'), ...blocks, audio.subarray(0, at)]);
}
