import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readSync } from 'node:fs';

/**
 * The audio containers uploads may hold, by the ffmpeg demuxer that reads them. Anything else — HLS, concat,
 * m3u/pls, SDP and every other format that can name further files or URLs — is never handed to ffmpeg.
 */
export const AUDIO_FORMATS = ['mp3', 'aac', 'mov', 'ogg', 'flac', 'wav'] as const;
export type AudioFormat = (typeof AUDIO_FORMATS)[number];

/** The file is not one of AUDIO_FORMATS (by its first bytes); `playlist` when it looks like a playlist or list of URLs. */
export class UnsupportedAudioError extends Error {
  constructor(
    readonly path: string,
    readonly playlist: boolean,
  ) {
    super(
      `${path}: ${playlist ? 'a playlist, not audio' : 'not an allowed audio format (mp3, aac, m4a, ogg, flac, wav)'}`,
    );
  }
}

/** The container named by the file's first bytes (after an ID3v2 tag), or undefined. */
export function sniffAudioFormat(head: Buffer, afterId3 = false): AudioFormat | undefined {
  const text = (from: number, length: number) => head.subarray(from, from + length).toString('latin1');
  if (text(0, 4) === 'fLaC') return 'flac';
  if (afterId3) return mpegSync(head);
  if (text(0, 4) === 'OggS') return 'ogg';
  if (text(0, 4) === 'RIFF' && text(8, 4) === 'WAVE') return 'wav';
  if (text(4, 4) === 'ftyp') return 'mov';
  return mpegSync(head);
}

/** An MPEG audio frame header (mp3 and its layers I/II) or an ADTS header (AAC). */
function mpegSync(head: Buffer): AudioFormat | undefined {
  if (head.length < 4 || head[0] !== 0xff || (head[1] & 0xe0) !== 0xe0) return undefined;
  const layer = (head[1] >> 1) & 3;
  if (layer === 0) {
    // ADTS: MPEG-4/2 AAC, sampling frequency index 0–12.
    return (head[1] & 0xf0) === 0xf0 && ((head[2] >> 2) & 0xf) <= 12 ? 'aac' : undefined;
  }
  const version = (head[1] >> 3) & 3;
  const bitrateIndex = head[2] >> 4;
  const sampleRateIndex = (head[2] >> 2) & 3;
  return version !== 1 && bitrateIndex !== 0xf && sampleRateIndex !== 3 ? 'mp3' : undefined;
}

/** Whether text at the start of a file reads like a playlist, a concat script, an SDP or a bare URL. */
export function looksLikePlaylist(head: Buffer): boolean {
  const start = head
    .subarray(0, 64)
    .toString('latin1')
    .replace(/^(\xef\xbb\xbf|\s)+/, '')
    .toLowerCase();
  return /^(#extm3u|#ext|ffconcat|\[playlist\]|file\s|v=0|<\?xml|<asx|<smil|<playlist|[a-z][a-z0-9+.-]*:\/\/|\/)/.test(
    start,
  );
}

/** Reads the file's first bytes, skipping an ID3v2 tag, and names its container; throws UnsupportedAudioError. */
export function detectAudioFormat(fd: number, path: string): AudioFormat {
  const head = Buffer.alloc(64);
  const length = readSync(fd, head, 0, head.length, 0);
  let start = head.subarray(0, length);
  let afterId3 = false;
  if (start.length >= 10 && start.toString('latin1', 0, 3) === 'ID3') {
    const size = ((start[6] & 0x7f) << 21) | ((start[7] & 0x7f) << 14) | ((start[8] & 0x7f) << 7) | (start[9] & 0x7f);
    const offset = 10 + size + (start[5] & 0x10 ? 10 : 0);
    const next = Buffer.alloc(16);
    start = next.subarray(0, readSync(fd, next, 0, next.length, offset));
    afterId3 = true;
  }
  const format = sniffAudioFormat(start, afterId3);
  if (!format) throw new UnsupportedAudioError(path, looksLikePlaylist(head.subarray(0, length)));
  return format;
}

/**
 * ffmpeg's input options for a file opened as stdin: the demuxer is forced to the sniffed format and only the
 * pipe protocol is allowed, so nothing inside the file can make ffmpeg open another file or a URL.
 */
export function audioInputArgs(format: AudioFormat): string[] {
  return ['-protocol_whitelist', 'pipe', '-f', format, '-i', 'pipe:0'];
}

/**
 * Starts `command` with the audio file as its stdin; `args` gets the input options to place where `-i` belongs.
 * Throws UnsupportedAudioError before starting anything when the file is not an allowed container.
 */
export function spawnOnAudio(
  command: string,
  path: string,
  args: (input: string[]) => string[],
): { child: ChildProcess; format: AudioFormat } {
  const fd = openSync(path, 'r');
  try {
    const format = detectAudioFormat(fd, path);
    // detached: out of the terminal's process group, so Ctrl-C reaches only serve, which stops it (and it ends by
    // itself on a broken pipe if serve dies).
    const child = spawn(command, args(audioInputArgs(format)), { stdio: [fd, 'pipe', 'pipe'], detached: true });
    return { child, format };
  } finally {
    closeSync(fd);
  }
}

export interface AudioRun {
  code: number | null;
  stdout: string;
  stderr: string;
  format: AudioFormat;
  /** Killed because it ran longer than timeoutMs. */
  timedOut: boolean;
}

/** Runs `command` on the audio file (as spawnOnAudio) to its end and collects its output; killed after timeoutMs or on abort. */
export function runOnAudio(
  command: string,
  path: string,
  args: (input: string[]) => string[],
  options: { timeoutMs: number; signal?: AbortSignal; maxBytes?: number },
): Promise<AudioRun> {
  let started: { child: ChildProcess; format: AudioFormat };
  try {
    started = spawnOnAudio(command, path, args);
  } catch (e) {
    return Promise.reject(e);
  }
  return collect(started.child, started.format, options);
}

/**
 * Runs `command` on audio bytes already read (a part of a file whose container was sniffed as `format`), written to
 * its stdin with the same forced demuxer and pipe-only input as runOnAudio; collected and bounded the same way.
 */
export function runOnAudioBytes(
  command: string,
  bytes: Buffer,
  format: AudioFormat,
  args: (input: string[]) => string[],
  options: { timeoutMs: number; signal?: AbortSignal; maxBytes?: number },
): Promise<AudioRun> {
  const child = spawn(command, args(audioInputArgs(format)), { stdio: ['pipe', 'pipe', 'pipe'], detached: true });
  // It may stop reading before the end (a duration limit): the broken pipe is expected.
  child.stdin!.on('error', () => {});
  child.stdin!.end(bytes);
  return collect(child, format, options);
}

function collect(
  child: ChildProcess,
  format: AudioFormat,
  options: { timeoutMs: number; signal?: AbortSignal; maxBytes?: number },
): Promise<AudioRun> {
  const maxBytes = options.maxBytes ?? 1024 * 1024;
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    const kill = () => child.kill('SIGKILL');
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, options.timeoutMs);
    options.signal?.addEventListener('abort', kill, { once: true });
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk;
      if (stdout.length > maxBytes) kill();
    });
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk).slice(-4000);
    });
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', kill);
      resolve({ code, stdout, stderr, format, timedOut });
    });
  });
}
