/**
 * What an upload's audio check accepts before and while it decodes. A few kilobytes can declare, or decode to, hours
 * of high-rate multichannel audio (silence compresses to almost nothing), and the decode that proves a file is audio
 * would hold an audio-check slot for minutes; these bounds keep the work of a check in line with the file's size and
 * the time the service bought.
 */

/** The most a stream may have: 7.1 is the widest layout real music ships in; 192 kHz the highest common rate. */
export const MAX_CHANNELS = 8;
export const MAX_SAMPLE_RATE = 192_000;
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
    return `it has ${channels} audio channels; at most ${MAX_CHANNELS} are accepted (the station plays stereo)`;
  if (rate > MAX_SAMPLE_RATE) return `its sample rate is ${rate} Hz; at most ${MAX_SAMPLE_RATE} Hz is accepted`;
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
