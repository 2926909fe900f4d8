import type { ChildProcess } from 'node:child_process';
import { runOnAudio, spawnOnAudio } from './audio-input.js';

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

/**
 * Reads the artist and title tags; rejects when the file is not an allowed audio container (even one stored before
 * uploads were checked for it) or ffprobe finds no audio stream in it.
 */
export async function probeTrack(
  path: string,
  options: { ffprobe?: string; signal?: AbortSignal } = {},
): Promise<TrackInfo> {
  const { code, stdout, stderr } = await runOnAudio(
    options.ffprobe ?? 'ffprobe',
    path,
    (input) => [
      '-v',
      'error',
      ...input,
      '-select_streams',
      'a:0',
      '-show_entries',
      'format_tags:stream_tags:stream=codec_type',
      '-of',
      'json',
    ],
    { signal: options.signal, timeoutMs: 10_000 },
  );
  if (code !== 0) throw new Error(`ffprobe could not read ${path}: ${stderr.trim() || `exit ${code}`}`);
  const probed = JSON.parse(stdout) as { streams?: Array<{ tags?: Tags }>; format?: { tags?: Tags } };
  const stream = probed.streams?.[0];
  if (!stream) throw new Error(`no audio stream in ${path}`);
  // MP3, WAV and FLAC carry tags on the file; Ogg and Opus on the stream.
  const tag = (name: string) => findTag(probed.format?.tags, name) ?? findTag(stream.tags, name);
  return { path, artist: tag('artist'), title: tag('title') };
}

type Tags = Record<string, string>;

function findTag(tags: Tags | undefined, name: string): string | undefined {
  const key = Object.keys(tags ?? {}).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : tags![key].trim();
  return value || undefined;
}

/**
 * Decodes the file's first audio stream to PCM on stdout, as fast as the reader takes it. The file is stdin and its
 * demuxer forced (see audio-input.ts); throws UnsupportedAudioError for anything but an allowed container.
 */
export function spawnDecoder(path: string, ffmpeg = 'ffmpeg'): ChildProcess {
  return spawnOnAudio(ffmpeg, path, (input) => [
    '-nostdin',
    '-hide_banner',
    '-loglevel',
    'error',
    ...input,
    '-map',
    '0:a:0',
    ...PCM_ARGS,
    'pipe:1',
  ]).child;
}
