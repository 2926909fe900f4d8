import { execFile } from 'node:child_process';
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
  return ffmpegOutput([
    '-f',
    'lavfi',
    '-i',
    `sine=frequency=523:duration=${seconds}`,
    '-metadata',
    `title=${title}`,
    '-metadata',
    'artist=Test Band',
    ...encoding,
    'pipe:1',
  ]);
}

/** CRC-8 (poly 0x07) of a FLAC frame header and CRC-16 (poly 0x8005) of a whole frame. */
function crc(bytes: Buffer, width: 8 | 16, poly: number): number {
  const top = 1 << (width - 1);
  const mask = (1 << width) - 1;
  let value = 0;
  for (const byte of bytes) {
    value ^= byte << (width - 8);
    for (let bit = 0; bit < 8; bit++) value = value & top ? ((value << 1) ^ poly) & mask : (value << 1) & mask;
  }
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
 * Silence as a FLAC of `seconds` at 8, 16, 44.1 or 48 kHz with 1 or 2 channels, written directly (constant subframes
 * in the largest blocks: about 18 bytes a frame), so hours take a fraction of a second to make; `sizeBytes` pads it
 * with a PADDING metadata block to that size. Its frame numbers and total length are right: it plays for `seconds`.
 */
export function flacSilence(options: { seconds: number; rate: number; channels: 1 | 2; sizeBytes?: number }): Buffer {
  const rateCode = { 8000: 4, 16000: 5, 44100: 9, 48000: 10 }[options.rate];
  if (!rateCode) throw new Error(`flacSilence: no rate code for ${options.rate}`);
  const block = 65535;
  const total = Math.round(options.seconds * options.rate);
  const streamInfo = Buffer.alloc(34);
  streamInfo.writeUInt16BE(block, 0);
  streamInfo.writeUInt16BE(block, 2);
  // sample rate (20 bits), channels - 1 (3), bits per sample - 1 (5), total samples (36)
  const packed = (BigInt(options.rate) << 44n) | (BigInt(options.channels - 1) << 41n) | (15n << 36n) | BigInt(total);
  streamInfo.writeBigUInt64BE(packed, 10);
  const frames: Buffer[] = [];
  for (let n = 0, done = 0; done < total; n++) {
    const size = Math.min(block, total - done);
    const header = Buffer.concat([
      Buffer.from([0xff, 0xf8, (7 << 4) | rateCode, ((options.channels - 1) << 4) | (4 << 1)]),
      utf8Number(n),
      Buffer.from([(size - 1) >> 8, (size - 1) & 0xff]),
    ]);
    const body = Buffer.concat([header, Buffer.from([crc(header, 8, 0x07)]), Buffer.alloc(3 * options.channels)]);
    const sum = Buffer.alloc(2);
    sum.writeUInt16BE(crc(body, 16, 0x8005));
    frames.push(body, sum);
    done += size;
  }
  const audio = Buffer.concat(frames);
  const blocks = [Buffer.from([0x00, 0, 0, 34]), streamInfo];
  const padding = (options.sizeBytes ?? 0) - (4 + 38 + audio.length + 4);
  if (padding > 0) {
    if (padding >= 1 << 24) throw new Error('flacSilence: at most 16 MB of padding');
    const head = Buffer.from([0x81, padding >> 16, (padding >> 8) & 0xff, padding & 0xff]);
    blocks.push(head, Buffer.alloc(padding));
  } else blocks[0][0] = 0x80;
  return Buffer.concat([Buffer.from('fLaC', 'latin1'), ...blocks, audio]);
}
