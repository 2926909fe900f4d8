import { closeSync, openSync, readSync } from 'node:fs';
import { mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { ApiError } from '../errors/index.js';
import { randomId } from '../ids/index.js';
import { type AudioFormat, type AudioRun, runOnAudioBytes } from '../provisioning/audio-input.js';
import { runOnAudio, UnsupportedAudioError } from '../provisioning/index.js';
import type { Database } from '../store/index.js';
import {
  boughtSecondsOf,
  type DeclaredStream,
  declaredProblem,
  decodeTimeLimitMs,
  sliceLayout,
  WHOLE_DECODE_SECONDS,
  WINDOW_BYTES,
  WINDOW_SECONDS,
  WINDOW_TIMEOUT_MS,
  windowOffsets,
} from './audio-bounds.js';
import { ProbeSlots } from './probe-slots.js';
import type { ServiceRow } from './service-records.js';
import {
  extractTrackArtwork,
  pictureStreamOf,
  type ProbedStream,
  TRACK_ARTWORK_NAME,
  type TrackArtwork,
  trackArtworkFileOf,
} from './track-artwork.js';
import { receiveUpload } from './upload-receiver.js';
import { overQuota, UploadReservations } from './upload-reservations.js';

const MB = 1024 * 1024;
const fileName = /^[A-Za-z0-9][A-Za-z0-9._ ()-]{0,127}$/;
const PARTIAL_PREFIX = '.upload-';

export interface UploadLimits {
  /** An upload is stopped when no byte arrives for this long (there is no limit on its total time). */
  idleTimeoutMs: number;
  /** Uploads in progress at once per service. */
  perService: number;
  /** Audio checks running at once on this instance, how many may wait, and how long. */
  probeConcurrency: number;
  probeQueue: number;
  probeWaitMs: number;
  /** Checks of files larger than this may hold every slot but one and wait in a queue of their own (probe-slots.ts). */
  probeLargeBytes: number;
  /** The longest one step of an audio check (ffprobe, the read through the file, a decode) may run. */
  probeTimeoutMs: number;
  /** The read through the file's time for any file, before the time per MB of it. */
  decodeBaseMs: number;
  /** How long a reservation outlives the last renewal by its instance (renewed every third of it): the wait after a crash. */
  reservationLeaseMs: number;
}

export interface MediaFile {
  name: string;
  size_bytes: number;
  format: string;
  duration_seconds: number | null;
  artist: string | null;
  title: string | null;
  created_at: Date;
}

/** Audio files of AutoDJ services: storage_mb reserved before they stream in (upload-reservations.ts), checked as audio, nothing partial ever kept. */
export class MediaLibrary {
  private readonly probes: ProbeSlots;
  private readonly reservations: UploadReservations;

  constructor(
    private readonly db: Database,
    private readonly dir: string,
    private readonly limits: UploadLimits,
    private readonly tools = { ffprobe: 'ffprobe', ffmpeg: 'ffmpeg' },
  ) {
    this.probes = new ProbeSlots(
      limits.probeConcurrency,
      limits.probeQueue,
      limits.probeWaitMs,
      limits.probeLargeBytes,
    );
    this.reservations = new UploadReservations(db, limits.reservationLeaseMs);
  }

  /** Removes what uploads cut short by a crash left on disk (their reservations lapse by themselves). */
  async removePartialUploads(): Promise<void> {
    const services = await readdir(this.dir).catch(() => [] as string[]);
    for (const service of services) {
      const names = await readdir(join(this.dir, service)).catch(() => [] as string[]);
      for (const name of names.filter((n) => n.startsWith(PARTIAL_PREFIX)))
        await rm(join(this.dir, service, name), { force: true });
    }
  }

  pathOf(serviceId: string, name: string): string {
    return join(this.dir, serviceId, name);
  }

  async list(serviceId: string): Promise<MediaFile[]> {
    return this.db.query<MediaFile & Record<string, unknown>>(
      'SELECT name, size_bytes::float8 AS size_bytes, format, duration_seconds::float8 AS duration_seconds, artist, title, created_at FROM service_files WHERE service_id = $1 ORDER BY name',
      [serviceId],
    );
  }

  async usedBytes(serviceId: string): Promise<number> {
    const [{ used }] = await this.db.query<{ used: number }>(
      'SELECT coalesce(sum(size_bytes), 0)::float8 AS used FROM service_files WHERE service_id = $1',
      [serviceId],
    );
    return used;
  }

  async upload(service: ServiceRow, name: string, body: Readable, declaredLength?: number): Promise<MediaFile> {
    if (!fileName.test(name) || name.includes('..')) {
      throw new ApiError(
        422,
        'invalid_file_name',
        'File names are 1–128 characters: letters, digits, spaces, dot, dash, underscore and parentheses, starting with a letter or digit.',
      );
    }
    if (declaredLength === undefined || !Number.isSafeInteger(declaredLength) || declaredLength < 0) {
      throw new ApiError(
        411,
        'length_required',
        'Send the file with a Content-Length header (its size in bytes): storage is reserved before the upload starts.',
      );
    }
    if (declaredLength === 0) throw emptyFile();
    const quota = quotaOf(service);
    if (declaredLength > quota) throw overQuota(service, quota - (await this.usedBytes(service.id)));

    const reservation = await this.reservations.reserve(service, declaredLength, quota, this.limits.perService);
    const renewal = setInterval(() => {
      this.reservations.renew(reservation).catch(() => {});
    }, this.reservations.leaseMs / 3);
    const serviceDir = join(this.dir, service.id);
    const partial = join(serviceDir, `${PARTIAL_PREFIX}${randomId('', 9)}`);
    try {
      this.probes.refuseIfFull(service.api_key_id, declaredLength); // before the body arrives, not after it
      await mkdir(serviceDir, { recursive: true });
      const received = await receiveUpload(body, partial, {
        expectedBytes: declaredLength,
        idleTimeoutMs: this.limits.idleTimeoutMs,
      });
      const probe = await this.probes.run(service.api_key_id, received, async () => {
        const audio = await this.probe(partial, received, boughtSecondsOf(service.limits));
        return { ...audio, artwork: await this.artworkIn(partial, audio.picture) };
      });
      return await this.keep({ service, name, received, quota, reservation, partial }, probe);
    } finally {
      clearInterval(renewal);
      await rm(partial, { force: true });
      await this.reservations.release(reservation).catch(() => {});
    }
  }

  /** Keeps a checked upload: within the quota under the service's lock, its picture beside it, then in place. */
  private async keep(upload: Received, probe: ProbedAudio & { artwork: TrackArtwork | undefined }): Promise<MediaFile> {
    const { service, name, received, quota, partial } = upload;
    const { file, previousArtwork } = await this.db.transaction(async (client) => {
      await client.query('SELECT 1 FROM services WHERE id = $1 FOR UPDATE', [service.id]);
      const {
        rows: [{ used, previous }],
      } = await client.query(
        `SELECT coalesce(sum(size_bytes) FILTER (WHERE name <> $2), 0)::float8 AS used,
           max(artwork_name) FILTER (WHERE name = $2) AS previous FROM service_files WHERE service_id = $1`,
        [service.id, name],
      );
      if (used + received > quota) throw overQuota(service, quota - used);
      const {
        rows: [row],
      } = await client.query(
        `INSERT INTO service_files (service_id, name, size_bytes, format, duration_seconds, artist, title, artwork_name, artwork_type)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (service_id, name) DO UPDATE SET size_bytes = $3, format = $4, duration_seconds = $5, artist = $6,
           title = $7, artwork_name = $8, artwork_type = $9, created_at = now()
         RETURNING name, size_bytes::float8 AS size_bytes, format, duration_seconds::float8 AS duration_seconds, artist, title, created_at`,
        [service.id, name, received, probe.format, probe.duration, probe.artist, probe.title].concat([
          probe.artwork?.name ?? null,
          probe.artwork?.type ?? null,
        ]),
      );
      await client.query('DELETE FROM upload_reservations WHERE id = $1', [upload.reservation]);
      if (probe.artwork) await this.writeArtwork(service.id, probe.artwork);
      await rename(partial, this.pathOf(service.id, name));
      return { file: row as MediaFile, previousArtwork: previous as string | null };
    });
    if (previousArtwork !== (probe.artwork?.name ?? null)) await this.dropUnusedArtwork(service.id, previousArtwork);
    return file;
  }

  /** The picture written whole under its content's name (the same picture of another track is the same file). */
  private async writeArtwork(serviceId: string, artwork: TrackArtwork): Promise<void> {
    const partial = this.pathOf(serviceId, `${PARTIAL_PREFIX}${randomId('', 9)}`);
    try {
      await writeFile(partial, artwork.bytes);
      await rename(partial, this.pathOf(serviceId, trackArtworkFileOf(artwork.name)));
    } finally {
      await rm(partial, { force: true });
    }
  }

  /** The cover picture in the file, when ffprobe listed one; a picture that cannot be read is no reason to refuse the audio. */
  private async artworkIn(path: string, stream: number | undefined): Promise<TrackArtwork | undefined> {
    if (stream === undefined) return undefined;
    return extractTrackArtwork(this.tools.ffmpeg, path, stream, this.limits.probeTimeoutMs).catch(() => undefined);
  }

  /** Removes a track picture's file once no file of the service names it. */
  private async dropUnusedArtwork(serviceId: string, artwork: string | null): Promise<void> {
    if (!artwork) return;
    const [{ used }] = await this.db.query<{ used: boolean }>(
      'SELECT EXISTS (SELECT 1 FROM service_files WHERE service_id = $1 AND artwork_name = $2) AS used',
      [serviceId, artwork],
    );
    if (!used) await rm(this.pathOf(serviceId, trackArtworkFileOf(artwork)), { force: true });
  }

  /** The cover picture of an uploaded file (by its file name), or null. */
  async artworkOf(serviceId: string, fileName: string): Promise<string | null> {
    const [row] = await this.db.query<{ artwork_name: string | null }>(
      'SELECT artwork_name FROM service_files WHERE service_id = $1 AND name = $2',
      [serviceId, fileName],
    );
    return row?.artwork_name ?? null;
  }

  /** A track picture of the service by its public name, as the listen page serves it; undefined when none is. */
  async trackArtwork(serviceId: string, name: string): Promise<{ type: string; path: string } | undefined> {
    if (!TRACK_ARTWORK_NAME.test(name)) return undefined;
    const [row] = await this.db.query<{ artwork_type: string }>(
      'SELECT artwork_type FROM service_files WHERE service_id = $1 AND artwork_name = $2 LIMIT 1',
      [serviceId, name],
    );
    return row && { type: row.artwork_type, path: this.pathOf(serviceId, trackArtworkFileOf(name)) };
  }

  async remove(serviceId: string, name: string): Promise<boolean> {
    const rows = await this.db.query<{ artwork_name: string | null }>(
      'DELETE FROM service_files WHERE service_id = $1 AND name = $2 RETURNING artwork_name',
      [serviceId, name],
    );
    if (rows.length) {
      await rm(this.pathOf(serviceId, name), { force: true });
      await this.dropUnusedArtwork(serviceId, rows[0].artwork_name);
    }
    return rows.length === 1;
  }

  /**
   * The file must be an allowed audio container by its first bytes (never a playlist), hold an audio stream, read
   * through to its end, and decode where it is sampled; ffprobe and ffmpeg read it (or the bytes of a window) as
   * stdin with the demuxer forced, so they open nothing else. What ffprobe declares is checked before anything is
   * decoded; the read through the file copies packets without decoding them (its length, bounded by the file's size:
   * audio-bounds.ts); a file of a minute or less is then decoded whole, a longer one in a few windows of 5 s.
   */
  private async probe(path: string, sizeBytes: number, boughtSeconds: number | undefined): Promise<ProbedAudio> {
    const run: Runner = (command, args, timeoutMs = this.limits.probeTimeoutMs) =>
      runOnAudio(command, path, args, { timeoutMs }).catch(unsupportedAudio);
    const { info, stream, format } = await this.declared(run, sizeBytes, boughtSeconds);
    const check = {
      run,
      format,
      limit: boughtSeconds === undefined ? [] : ['-t', String(boughtSeconds + 1)],
      readMs: decodeTimeLimitMs(sizeBytes, { baseMs: this.limits.decodeBaseMs, maxMs: this.limits.probeTimeoutMs }),
      sizeBytes,
      boughtSeconds,
    };
    let duration = await this.readThrough(check, stream);
    if (duration <= WHOLE_DECODE_SECONDS) duration = await this.decodeWhole(check);
    else await this.decodeWindows(check, path);
    // MP3, WAV and FLAC carry tags on the file; Ogg and Opus on the stream.
    const tags = { ...lowerKeys(stream.tags), ...lowerKeys(info.format?.tags) };
    return {
      format: info.format?.format_name ?? format,
      duration: Math.round(duration * 1000) / 1000,
      artist: tags.artist ?? null,
      title: tags.title ?? null,
      picture: pictureStreamOf(info.streams),
    };
  }

  /** What ffprobe declares, checked against the limits before anything is decoded. */
  private async declared(run: Runner, sizeBytes: number, boughtSeconds: number | undefined) {
    const args = (input: string[]) => ['-v', 'error', ...input, '-show_streams', '-show_format', '-of', 'json'];
    const probed = await run(this.tools.ffprobe, args);
    let info: ProbeInfo;
    try {
      info = JSON.parse(probed.stdout);
    } catch {
      info = {};
    }
    const stream = info.streams?.find((s) => s.codec_type === 'audio');
    if (probed.code !== 0 || !stream || !info.format?.format_name) throw notAudio('ffprobe found no audio stream');
    const refused = declaredProblem(stream, info.format.duration, sizeBytes, boughtSeconds);
    if (refused) throw beyondLimits(refused);
    return { info, stream, format: probed.format };
  }

  /** Its length: every packet read and copied, none decoded. */
  private async readThrough(check: AudioCheck, stream: DeclaredStream): Promise<number> {
    const read = await check.run(this.tools.ffmpeg, toNull(['-c', 'copy', ...check.limit]), check.readMs);
    if (read.timedOut) throw tooSlow(check);
    const duration = endOf(read);
    if (duration === undefined) throw notAudio(`it does not read as ${check.format} to its end`);
    refuseLonger(check, duration);
    const measured = declaredProblem(
      { ...stream, duration: String(duration) },
      undefined,
      check.sizeBytes,
      check.boughtSeconds,
    );
    if (measured) throw beyondLimits(measured.replace('declares', 'holds'));
    return duration;
  }

  /** Short: decoded whole, which proves it is audio (not just a header in front of something else) to its end. */
  private async decodeWhole(check: AudioCheck): Promise<number> {
    const decoded = await check.run(this.tools.ffmpeg, toNull(check.limit), check.readMs);
    if (decoded.timedOut) throw tooSlow(check);
    const decodedSeconds = endOf(decoded);
    if (decodedSeconds === undefined) throw notAudio(`it does not decode as ${check.format}`);
    refuseLonger(check, decodedSeconds);
    return decodedSeconds;
  }

  /** Long: decoded in windows of a few seconds — at its start, then cut out of it at a few places to its end. */
  private async decodeWindows(check: AudioCheck, path: string): Promise<void> {
    const window = toNull(['-t', String(WINDOW_SECONDS)]);
    const first = await check.run(this.tools.ffmpeg, window, WINDOW_TIMEOUT_MS);
    if (endOf(first) === undefined) throw notAudio(`its start does not decode as ${check.format}`);
    for (const part of this.windows(path, check.format, check.sizeBytes)) {
      const decoded = await runOnAudioBytes(this.tools.ffmpeg, part.bytes, check.format, window, {
        timeoutMs: WINDOW_TIMEOUT_MS,
      });
      if (endOf(decoded) === undefined)
        throw notAudio(`the part of it at byte ${part.at} does not decode as ${check.format}`);
    }
  }

  /** The windows cut out of a long file after its start: its header's bytes, then WINDOW_BYTES from each offset. */
  private windows(path: string, format: AudioFormat, size: number): Array<{ at: number; bytes: Buffer }> {
    const fd = openSync(path, 'r');
    try {
      const layout = sliceLayout(fd, format, size);
      if (!layout) return [];
      return windowOffsets(layout, size).map((at) => {
        const slice = Buffer.alloc(WINDOW_BYTES);
        const length = readSync(fd, slice, 0, WINDOW_BYTES, at);
        return { at, bytes: Buffer.concat([layout.head, slice.subarray(0, length)]) };
      });
    } finally {
      closeSync(fd);
    }
  }
}

export function quotaOf(service: ServiceRow): number {
  const mb = Number(service.limits.storage_mb ?? 0);
  return mb * MB;
}

function emptyFile(): ApiError {
  return new ApiError(422, 'empty_file', 'The upload was empty. Send the audio file as the request body.');
}

function beyondLimits(why: string): ApiError {
  return new ApiError(
    422,
    'audio_beyond_limits',
    `The file was not kept: ${why}. Upload ordinary audio (MP3, AAC, M4A, Ogg, FLAC or WAV; mono or stereo, at most 48 kHz; no longer than the service's paid time).`,
  );
}

function notAudio(why: string): ApiError {
  return new ApiError(
    422,
    'not_audio',
    `The file is not audio that the AutoDJ can play (${why}). Upload an audio file: MP3, AAC, M4A, Ogg (Vorbis or Opus), FLAC or WAV.`,
  );
}

type ProbedAudio = {
  format: string;
  duration: number | null;
  artist: string | null;
  title: string | null;
  /** The stream of its cover picture, if it has one. */
  picture: number | undefined;
};
type ProbeInfo = {
  streams?: Array<DeclaredStream & ProbedStream & { tags?: Record<string, string> }>;
  format?: { format_name?: string; duration?: string; tags?: Record<string, string> };
};
type Runner = (command: string, args: (input: string[]) => string[], timeoutMs?: number) => Promise<AudioRun>;
/** An upload received whole and checked, waiting to be kept. */
interface Received {
  service: ServiceRow;
  name: string;
  received: number;
  quota: number;
  reservation: string;
  partial: string;
}
/** One file's check: how it is run and the bounds it is held to. */
interface AudioCheck {
  run: Runner;
  format: AudioFormat;
  limit: string[];
  readMs: number;
  sizeBytes: number;
  boughtSeconds: number | undefined;
}

function unsupportedAudio(e: unknown): never {
  if (!(e instanceof UnsupportedAudioError)) throw e;
  if (e.playlist)
    throw new ApiError(
      415,
      'playlist_not_accepted',
      'The file is a playlist (HLS, m3u, pls, concat or similar), not audio. ' +
        'Upload the audio file itself: MP3, AAC, M4A, Ogg (Vorbis or Opus), FLAC or WAV.',
    );
  throw notAudio('its first bytes are not one of these formats');
}

/** ffmpeg reading the first audio stream to nowhere, reporting its progress. */
const toNull = (extra: string[]) => (input: string[]) => [
  '-nostdin',
  '-v',
  'error',
  ...input,
  '-map',
  '0:a:0',
  ...extra,
  '-f',
  'null',
  '-progress',
  'pipe:1',
  '-nostats',
  '-',
];

/** The seconds a run of toNull got through, when it finished cleanly. */
function endOf(run: AudioRun): number | undefined {
  const outTimeUs = Number([...run.stdout.matchAll(/^out_time_us=(\d+)$/gm)].at(-1)?.[1]);
  return run.code === 0 && /^progress=end$/m.test(run.stdout) && outTimeUs > 0 ? outTimeUs / 1e6 : undefined;
}

function tooSlow(check: AudioCheck): ApiError {
  return beyondLimits(
    `checking it took more than the ${check.readMs / 1000} s allowed for a file of ${check.sizeBytes} bytes: ` +
      'it holds far more packets or audio than real audio of that size',
  );
}

function refuseLonger(check: AudioCheck, seconds: number): void {
  if (check.boughtSeconds !== undefined && seconds > check.boughtSeconds)
    throw beyondLimits(`it plays longer than the ${check.boughtSeconds / 3600} h this service was bought for`);
}

const lowerKeys = (tags?: Record<string, string>): Record<string, string> =>
  Object.fromEntries(Object.entries(tags ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
