import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';

// Every track is decoded to the same raw PCM, so one encoder can play them back to back.
export const PCM = { sampleRate: 44100, channels: 2, format: 's16le', bytesPerSample: 2 } as const;
export const PCM_FRAME_BYTES = PCM.channels * PCM.bytesPerSample;
export const PCM_BYTES_PER_SECOND = PCM.sampleRate * PCM_FRAME_BYTES;

/** ffmpeg options naming this PCM format, for the decoders' output and the encoder's input. */
export const PCM_ARGS = ['-f', PCM.format, '-ar', String(PCM.sampleRate), '-ac', String(PCM.channels)];

export interface TrackInfo {
  path: string;
  artist?: string;
  title?: string;
}

const execFileAsync = promisify(execFile);

/** Reads the artist and title tags; rejects when ffprobe finds no audio stream in the file. */
export async function probeTrack(path: string, options: { ffprobe?: string; signal?: AbortSignal } = {}): Promise<TrackInfo> {
  const { stdout } = await execFileAsync(options.ffprobe ?? 'ffprobe', [
    '-v', 'error', '-select_streams', 'a:0', '-show_entries', 'format_tags:stream_tags:stream=codec_type', '-of', 'json', asFile(path),
  ], { signal: options.signal, timeout: 10_000, maxBuffer: 1024 * 1024 });
  const probed = JSON.parse(stdout) as { streams?: Array<{ tags?: Tags }>; format?: { tags?: Tags } };
  const stream = probed.streams?.[0];
  if (!stream) throw new Error(`no audio stream in ${path}`);
  // MP3, WAV and FLAC carry tags on the file; Ogg and Opus on the stream.
  const tag = (name: string) => findTag(probed.format?.tags, name) ?? findTag(stream.tags, name);
  return { path, artist: tag('artist'), title: tag('title') };
}

// `file:` keeps ffmpeg from reading a name as another protocol (`http:`, `pipe:`) or an option.
const asFile = (path: string) => `file:${path}`;

type Tags = Record<string, string>;

function findTag(tags: Tags | undefined, name: string): string | undefined {
  const key = Object.keys(tags ?? {}).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : tags![key].trim();
  return value || undefined;
}

/** Decodes the file's first audio stream to PCM on stdout, as fast as the reader takes it. */
export function spawnDecoder(path: string, ffmpeg = 'ffmpeg'): ChildProcess {
  return spawn(ffmpeg, [
    '-nostdin', '-hide_banner', '-loglevel', 'error',
    '-i', asFile(path), '-map', '0:a:0', ...PCM_ARGS, 'pipe:1',
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
}
