import { execFile } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { promisify } from 'node:util';
import { ApiError } from '../errors/index.js';
import { randomId } from '../ids/index.js';
import type { Database } from '../store/index.js';
import type { ServiceRow } from './service-records.js';

const run = promisify(execFile);
const MB = 1024 * 1024;
const fileName = /^[A-Za-z0-9][A-Za-z0-9._ ()-]{0,127}$/;

export interface MediaFile { name: string; size_bytes: number; format: string; duration_seconds: number | null; artist: string | null; title: string | null; created_at: Date }

/** Audio files of AutoDJ services, counted against storage_mb while they stream in; nothing partial is ever kept. */
export class MediaLibrary {
  constructor(private readonly db: Database, private readonly dir: string, private readonly ffprobe = 'ffprobe') {}

  pathOf(serviceId: string, name: string): string {
    return join(this.dir, serviceId, name);
  }

  async list(serviceId: string): Promise<MediaFile[]> {
    return this.db.query<MediaFile & Record<string, unknown>>(
      'SELECT name, size_bytes::float8 AS size_bytes, format, duration_seconds::float8 AS duration_seconds, artist, title, created_at FROM service_files WHERE service_id = $1 ORDER BY name', [serviceId]);
  }

  async usedBytes(serviceId: string): Promise<number> {
    const [{ used }] = await this.db.query<{ used: number }>('SELECT coalesce(sum(size_bytes), 0)::float8 AS used FROM service_files WHERE service_id = $1', [serviceId]);
    return used;
  }

  async upload(service: ServiceRow, name: string, body: Readable, declaredLength?: number): Promise<MediaFile> {
    if (!fileName.test(name) || name.includes('..')) {
      throw new ApiError(422, 'invalid_file_name', 'File names are 1–128 characters: letters, digits, spaces, dot, dash, underscore and parentheses, starting with a letter or digit.');
    }
    const quota = quotaOf(service);
    const replaced = (await this.list(service.id)).find((f) => f.name === name)?.size_bytes ?? 0;
    const room = quota - (await this.usedBytes(service.id)) + replaced;
    if (declaredLength !== undefined && declaredLength > room) throw overQuota(service, room);

    const serviceDir = join(this.dir, service.id);
    await mkdir(serviceDir, { recursive: true });
    const partial = join(serviceDir, `.upload-${randomId('', 9)}`);
    let received = 0;
    const meter = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        received += chunk.length;
        done(received > room ? overQuota(service, room) : null, chunk);
      },
    });
    try {
      await pipeline(body, meter, createWriteStream(partial, { mode: 0o640 }));
      if (received === 0) throw new ApiError(422, 'empty_file', 'The upload was empty. Send the audio file as the request body.');
      const probe = await this.probe(partial);
      return await this.db.transaction(async (client) => {
        await client.query('SELECT 1 FROM services WHERE id = $1 FOR UPDATE', [service.id]);
        const { rows: [{ used }] } = await client.query('SELECT coalesce(sum(size_bytes), 0)::float8 AS used FROM service_files WHERE service_id = $1 AND name <> $2', [service.id, name]);
        if (used + received > quota) throw overQuota(service, quota - used);
        const { rows: [row] } = await client.query(
          `INSERT INTO service_files (service_id, name, size_bytes, format, duration_seconds, artist, title) VALUES ($1, $2, $3, $4, $5, $6, $7)
           ON CONFLICT (service_id, name) DO UPDATE SET size_bytes = $3, format = $4, duration_seconds = $5, artist = $6, title = $7, created_at = now()
           RETURNING name, size_bytes::float8 AS size_bytes, format, duration_seconds::float8 AS duration_seconds, artist, title, created_at`,
          [service.id, name, received, probe.format, probe.duration, probe.artist, probe.title]);
        await rename(partial, this.pathOf(service.id, name));
        return row as MediaFile;
      });
    } finally {
      await rm(partial, { force: true });
    }
  }

  async remove(serviceId: string, name: string): Promise<boolean> {
    const rows = await this.db.query('DELETE FROM service_files WHERE service_id = $1 AND name = $2 RETURNING name', [serviceId, name]);
    if (rows.length) await rm(this.pathOf(serviceId, name), { force: true });
    return rows.length === 1;
  }

  /** ffprobe's view of the file: it must hold an audio stream. */
  private async probe(path: string): Promise<{ format: string; duration: number | null; artist: string | null; title: string | null }> {
    let info: { streams?: { codec_type?: string }[]; format?: { format_name?: string; duration?: string; tags?: Record<string, string> } };
    try {
      const { stdout } = await run(this.ffprobe, ['-v', 'error', '-show_streams', '-show_format', '-of', 'json', path], { timeout: 20_000 });
      info = JSON.parse(stdout);
    } catch {
      info = {};
    }
    if (!info.streams?.some((s) => s.codec_type === 'audio') || !info.format?.format_name) {
      throw new ApiError(422, 'not_audio', 'The file is not audio that the AutoDJ can play (ffprobe found no audio stream). Upload an audio file such as MP3, AAC, Ogg, FLAC or WAV.');
    }
    const tags = Object.fromEntries(Object.entries(info.format.tags ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
    const duration = Number(info.format.duration);
    return { format: info.format.format_name, duration: Number.isFinite(duration) ? duration : null, artist: tags.artist ?? null, title: tags.title ?? null };
  }
}

export function quotaOf(service: ServiceRow): number {
  const mb = Number(service.limits.storage_mb ?? 0);
  return mb * MB;
}

function overQuota(service: ServiceRow, room: number): ApiError {
  return new ApiError(413, 'storage_quota_exceeded',
    `This upload does not fit in the service's storage (${service.limits.storage_mb} MB bought, ${Math.max(0, Math.floor(room / MB * 100) / 100)} MB free). Nothing was kept. Delete files or upload a smaller one.`);
}
