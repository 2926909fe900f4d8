import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';

/** How a stream's audio is written as it came: the muxer for its content type and the file's extension. */
export interface StreamFormat {
  muxer: string;
  extension: string;
  contentType: string;
  /** Options that keep the file a plain run of frames, so that a later session appends to it cleanly. */
  options: string[];
}

const MP3: StreamFormat = {
  muxer: 'mp3',
  extension: 'mp3',
  contentType: 'audio/mpeg',
  options: ['-write_xing', '0', '-id3v2_version', '0'],
};
const FORMATS: Record<string, StreamFormat> = {
  'audio/mpeg': MP3,
  'audio/mp3': MP3,
  'audio/aac': { muxer: 'adts', extension: 'aac', contentType: 'audio/aac', options: [] },
  'audio/aacp': { muxer: 'adts', extension: 'aac', contentType: 'audio/aac', options: [] },
  'application/ogg': { muxer: 'ogg', extension: 'ogg', contentType: 'audio/ogg', options: [] },
  'audio/ogg': { muxer: 'ogg', extension: 'ogg', contentType: 'audio/ogg', options: [] },
};

/** The format a mount's content type is kept in, or undefined when it is one we do not record. */
export function streamFormatOf(contentType: string): StreamFormat | undefined {
  return FORMATS[contentType.split(';')[0].trim().toLowerCase()];
}

export interface CaptureSource {
  /** The mount on the local Icecast, e.g. http://127.0.0.1:8000/abc.mp3 */
  url: string;
  user: string;
  secret: string;
  userAgent: string;
}

/**
 * One source session written to the end of `file` by ffmpeg, copying the stream's packets as they are: the audio
 * goes from Icecast to the file without passing through Node (ffmpeg's output is the file, opened for appending).
 * It ends by itself when the source leaves (Icecast closes its listeners).
 */
export function startCapture(source: CaptureSource, format: StreamFormat, file: string): ChildProcess {
  const fd = openSync(file, 'a');
  try {
    const url = new URL(source.url);
    url.username = encodeURIComponent(source.user);
    url.password = encodeURIComponent(source.secret);
    const args = [
      '-nostdin',
      '-loglevel',
      'error',
      '-auth_type',
      'basic',
      '-user_agent',
      source.userAgent,
      '-i',
      url.href,
      '-map',
      '0:a:0',
      '-c',
      'copy',
      '-f',
      format.muxer,
      ...format.options,
      'pipe:1',
    ];
    return spawn('ffmpeg', args, { stdio: ['ignore', fd, 'pipe'] });
  } finally {
    closeSync(fd);
  }
}
