import { readSync } from 'node:fs';
import type { AudioFormat } from '../provisioning/audio-input.js';

/**
 * What an upload's audio check accepts before and while it decodes. A few kilobytes can declare, or decode to, hours
 * of high-rate multichannel audio (silence compresses to almost nothing), and a decode of all of it would hold an
 * audio-check slot for minutes. So what no station broadcasts is refused from the header, and a long file is read
 * through once without decoding (its length) and decoded only in a few short windows: the work of a check follows
 * the file's size, not the hours it declares.
 */

/**
 * The most a stream may have: every station streams stereo at 48 kHz or less (the AutoDJ encodes to MP3 at 44.1 or
 * 48 kHz), and more channels or a higher rate only multiply the work of decoding it. Refused from the header, with
 * a message saying how to convert the file.
 */
export const MAX_CHANNELS = 2;
export const MAX_SAMPLE_RATE = 48_000;
/** A file that plays this long or less is decoded whole; a longer one only in windows. */
export const WHOLE_DECODE_SECONDS = 60;
/** A window: at most this much audio, from at most this many bytes, within this time. */
export const WINDOW_SECONDS = 5;
export const WINDOW_BYTES = 512 * 1024;
export const WINDOW_TIMEOUT_MS = 10_000;
/** Windows besides the one at the start: spread over the audio, the last one ending at the file's end. */
export const WINDOWS = 3;
/**
 * The most decoded audio (16-bit PCM bytes) one stored byte may declare. Real files stay far below: FLAC about 2,
 * MP3 at 32 kbps about 44, Opus at 6 kbps about 256.
 */
export const MAX_EXPANSION = 2000;

/** A decode is given a configured base time plus this long per MB of file, at most the configured limit. */
const DECODE_MS_PER_MB = 500;

export interface DeclaredStream {
  channels?: number;
  sample_rate?: string | number;
  duration?: string;
}

/** Why the stream's declared properties are refused before it is decoded, or undefined when they are acceptable. */
export function declaredProblem(
  stream: DeclaredStream,
  formatDuration: string | undefined,
  sizeBytes: number,
  boughtSeconds: number | undefined,
): string | undefined {
  const channels = Number(stream.channels ?? 0);
  const rate = Number(stream.sample_rate ?? 0);
  if (channels > MAX_CHANNELS)
    return `it has ${channels} audio channels; at most ${MAX_CHANNELS} are accepted (the station plays stereo: mix it down, e.g. ffmpeg -i IN -ac 2 OUT)`;
  if (rate > MAX_SAMPLE_RATE)
    return `its sample rate is ${rate} Hz; at most ${MAX_SAMPLE_RATE} Hz is accepted (the station streams at 44.1 or 48 kHz: resample it, e.g. ffmpeg -i IN -ar 48000 OUT)`;
  const duration = Number(stream.duration ?? formatDuration);
  if (!(duration > 0)) return undefined;
  if (boughtSeconds !== undefined && duration > boughtSeconds) {
    return `it declares ${formatHours(duration)} of audio, longer than the ${formatHours(boughtSeconds)} this service was bought for`;
  }
  const pcmBytes = duration * Math.max(rate, 1) * Math.max(channels, 1) * 2;
  if (pcmBytes > sizeBytes * MAX_EXPANSION) {
    return `it declares ${formatHours(duration)} of ${channels}-channel ${rate} Hz audio in ${sizeBytes} bytes, far more than real audio of that size holds`;
  }
  return undefined;
}

/** How long the test decode of a file of this size may run. */
export function decodeTimeLimitMs(sizeBytes: number, limits: { baseMs: number; maxMs: number }): number {
  return Math.min(limits.maxMs, limits.baseMs + Math.ceil((sizeBytes / (1024 * 1024)) * DECODE_MS_PER_MB));
}

/** The service's paid time in seconds, when its limits name it. */
export function boughtSecondsOf(limits: Record<string, unknown>): number | undefined {
  const hours = Number(limits.duration_hours);
  return hours > 0 ? hours * 3600 : undefined;
}

function formatHours(seconds: number): string {
  return seconds >= 3600 ? `${Math.round((seconds / 3600) * 10) / 10} h` : `${Math.round(seconds)} s`;
}

/**
 * How to cut a window out of the middle of a file of this container: the bytes its demuxer needs first (the header,
 * without pictures or padding), where the audio data starts, and the unit a cut must align to. Undefined when the
 * container cannot be cut (MP4/M4A: its index is needed and may sit at the end), or its header is not understood or
 * unusually large: then only the window at the start is decoded.
 */
export function sliceLayout(
  fd: number,
  format: AudioFormat,
  size: number,
): { head: Buffer; dataStart: number; align: number } | undefined {
  const read = (at: number, length: number) => {
    const buffer = Buffer.alloc(Math.max(0, Math.min(length, size - at)));
    return buffer.subarray(0, buffer.length ? readSync(fd, buffer, 0, buffer.length, at) : 0);
  };
  const MAX_HEAD = 4 * 1024 * 1024;
  if (format === 'mp3' || format === 'aac') {
    // Frames resynchronise by themselves; only an ID3v2 tag (with its pictures) is skipped.
    const id3 = read(0, 10);
    if (id3.length === 10 && id3.toString('latin1', 0, 3) === 'ID3') {
      const tag = ((id3[6] & 0x7f) << 21) | ((id3[7] & 0x7f) << 14) | ((id3[8] & 0x7f) << 7) | (id3[9] & 0x7f);
      return { head: Buffer.alloc(0), dataStart: 10 + tag + (id3[5] & 0x10 ? 10 : 0), align: 1 };
    }
    return { head: Buffer.alloc(0), dataStart: 0, align: 1 };
  }
  if (format === 'flac') {
    // Frames resynchronise; the decoder needs STREAMINFO, sent alone as the only metadata block.
    let at = 4;
    let streamInfo: Buffer | undefined;
    for (let blocks = 0; blocks < 1000; blocks++) {
      const header = read(at, 4);
      if (header.length < 4) return undefined;
      const length = header.readUIntBE(1, 3);
      if ((header[0] & 0x7f) === 0 && length === 34) streamInfo = read(at + 4, 34);
      at += 4 + length;
      if (header[0] & 0x80) break;
    }
    if (!streamInfo || streamInfo.length !== 34 || at > size) return undefined;
    return {
      head: Buffer.concat([Buffer.from('fLaC\x80\x00\x00\x22', 'latin1'), streamInfo]),
      dataStart: at,
      align: 1,
    };
  }
  if (format === 'wav') {
    // Samples have no sync: a cut is aligned to whole sample frames after everything up to the data chunk.
    let align = 0;
    for (let at = 12; at + 8 <= Math.min(size, MAX_HEAD); ) {
      const chunk = read(at, 8);
      const id = chunk.toString('latin1', 0, 4);
      const length = chunk.readUInt32LE(4);
      if (id === 'fmt ') align = read(at + 8, 16).readUInt16LE(12);
      if (id === 'data') return align > 0 ? { head: read(0, at + 8), dataStart: at + 8, align } : undefined;
      at += 8 + length + (length % 2);
    }
    return undefined;
  }
  if (format === 'ogg') {
    // Pages resynchronise; the codec's header pages (granule position 0, or none on a page no packet ends on) go first.
    let at = 0;
    while (at < Math.min(size, MAX_HEAD)) {
      const page = read(at, 27);
      if (page.length < 27 || page.toString('latin1', 0, 4) !== 'OggS') return undefined;
      const granule = page.readBigUInt64LE(6);
      if (granule !== 0n && granule !== 0xffffffffffffffffn)
        return at > 0 ? { head: read(0, at), dataStart: at, align: 1 } : undefined;
      const segments = read(at + 27, page[26]);
      at += 27 + page[26] + segments.reduce((sum, n) => sum + n, 0);
    }
    return undefined;
  }
  return undefined;
}

/**
 * Where the windows after the first are cut: spread over the audio data, the last one ending at the file's end; a
 * file of less than a window's bytes gets one window from the middle of its data to its end.
 */
export function windowOffsets(layout: { dataStart: number; align: number }, size: number): number[] {
  const aligned = (at: number) => layout.dataStart + at - (at % layout.align);
  const span = size - layout.dataStart - WINDOW_BYTES;
  if (span <= 0) return size - layout.dataStart > 1 ? [aligned(Math.floor((size - layout.dataStart) / 2))] : [];
  return Array.from({ length: WINDOWS }, (_, i) => aligned(Math.round((span * (i + 1)) / WINDOWS)));
}
