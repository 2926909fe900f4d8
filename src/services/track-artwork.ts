import { createHash } from 'node:crypto';
import { spawnOnAudio } from '../provisioning/audio-input.js';
import { ARTWORK_LIMITS, imageFacts } from '../station-profile/index.js';

/** The picture types a track's artwork may have: what every browser shows, and what audio tags carry. */
const TYPES = { 'image/png': 'png', 'image/jpeg': 'jpg' } as const;
type TrackArtworkType = keyof typeof TYPES;

/** A cover picture copied out of an audio file, checked, and the name it is kept under (from its content). */
export interface TrackArtwork {
  bytes: Buffer;
  type: TrackArtworkType;
  /** `{hash}.{ext}`; on disk `.track-art-{name}`, which no uploaded file name can be. */
  name: string;
}

export const TRACK_ARTWORK_NAME = /^[0-9a-f]{32}\.(png|jpg)$/;
export const trackArtworkFileOf = (name: string) => `.track-art-${name}`;

/** A stream ffprobe lists: the cover picture is a video stream marked as attached. */
export interface ProbedStream {
  index?: number;
  codec_type?: string;
  codec_name?: string;
  disposition?: { attached_pic?: number };
}

/** The index of the file's attached cover picture when it is a PNG or JPEG, else undefined. */
export function pictureStreamOf(streams: ProbedStream[] | undefined): number | undefined {
  const picture = streams?.find(
    (s) => s.codec_type === 'video' && s.disposition?.attached_pic === 1 && ['png', 'mjpeg'].includes(s.codec_name!),
  );
  return typeof picture?.index === 'number' ? picture.index : undefined;
}

/** The picture's bytes as an image the page may show: PNG or JPEG by its own header, within the artwork's limits. */
export function checkTrackArtwork(bytes: Buffer): TrackArtwork | undefined {
  const facts = imageFacts(bytes);
  if (!facts || !(facts.type in TYPES) || bytes.length > ARTWORK_LIMITS.maxBytes) return undefined;
  const { minSide, maxSide } = ARTWORK_LIMITS;
  if ([facts.width, facts.height].some((side) => side < minSide || side > maxSide)) return undefined;
  const type = facts.type as TrackArtworkType;
  const hash = createHash('sha256').update(bytes).digest('hex').slice(0, 32);
  return { bytes, type, name: `${hash}.${TYPES[type]}` };
}

/**
 * Copies the picture stream out of the audio file unchanged (ffmpeg reads the file as stdin with its demuxer forced,
 * as every check of an upload does) and checks it; undefined when there is none fit to show. A picture larger than
 * the limit is stopped while it is read.
 */
export function extractTrackArtwork(
  ffmpeg: string,
  path: string,
  stream: number,
  timeoutMs: number,
): Promise<TrackArtwork | undefined> {
  const args = (input: string[]) => [
    '-nostdin',
    '-v',
    'error',
    ...input,
    '-map',
    `0:${stream}`,
    '-frames:v',
    '1',
    '-c:v',
    'copy',
    '-f',
    'image2pipe',
    'pipe:1',
  ];
  const { child } = spawnOnAudio(ffmpeg, path, args);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => child.kill('SIGKILL');
    const timer = setTimeout(stop, timeoutMs);
    child.stdout!.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > ARTWORK_LIMITS.maxBytes) stop();
      else chunks.push(chunk);
    });
    child.stderr!.resume();
    child.on('error', () => resolve(undefined));
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve(code === 0 && size <= ARTWORK_LIMITS.maxBytes ? checkTrackArtwork(Buffer.concat(chunks)) : undefined);
    });
  });
}
