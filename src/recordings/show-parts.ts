import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { readdir, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Database } from '../store/index.js';
import { audioDuration } from './audio-duration.js';
import { wholeFramesEnd } from './whole-frames.js';

/** A file an earlier host wrote of a show, and how many of its bytes belong to the show. */
interface ShowPart {
  file: string;
  bytes: number;
}

interface OpenShow extends Record<string, unknown> {
  id: string;
  service_id: string;
  host_id: string | null;
  file_name: string;
  parts: ShowPart[];
}

/** What the host that recorded a show may do with it now. */
export type Fence = 'recording' | 'deleted' | 'moved';

/**
 * The files of a show that went on across hosts. Each host writes a file of its own; when a host takes a show over,
 * the file of the one before is kept only up to its size at that moment. A host that froze (stopped, not dead) and
 * wakes up after its service moved may still append to its file for a while: none of that reaches the show. Its row
 * is fenced too: a host writes the show's size only while the show is its own. When the show ends, its parts are
 * joined into one new file, which no earlier writer holds open.
 */
export class ShowParts {
  constructor(
    private readonly db: Database,
    private readonly pathOf: (serviceId: string, name: string) => string,
  ) {}

  /** Makes the open show of a service placed on this host this host's own, in a new file, when another wrote it. */
  async takeOver(serviceId: string, hostId: string): Promise<void> {
    const [open] = await this.db.query<OpenShow>(
      `SELECT r.id, r.service_id, r.host_id, r.file_name, r.parts FROM recordings r JOIN services s ON s.id = r.service_id
       WHERE r.service_id = $1 AND r.ended_at IS NULL AND s.host_id = $2`,
      [serviceId, hostId],
    );
    if (!open || open.host_id === hostId) return;
    const bytes = await sizeOf(this.pathOf(serviceId, open.file_name));
    await this.db.query(
      `UPDATE recordings SET parts = parts || jsonb_build_array(jsonb_build_object('file', file_name, 'bytes', $3::bigint)),
         file_name = $4, host_id = $5, paused_at = NULL, sessions = sessions + 1
       WHERE id = $1 AND file_name = $2 AND ended_at IS NULL`,
      [open.id, open.file_name, bytes, newFileName(open), hostId],
    );
  }

  /** The bytes the show has in the files of earlier hosts. */
  async partsBytes(id: string): Promise<number> {
    const [row] = await this.db.query<{ bytes: number }>(
      `SELECT coalesce(sum((part->>'bytes')::bigint), 0)::float8 AS bytes
       FROM recordings, jsonb_array_elements(parts) AS p(part) WHERE id = $1`,
      [id],
    );
    return row?.bytes ?? 0;
  }

  /** Writes the show's size and titles if it is still this host's to write. */
  async grew(id: string, hostId: string, sizeBytes: number, titles: unknown[]): Promise<Fence> {
    const written = await this.db.query(
      `UPDATE recordings SET size_bytes = $3, titles = $4 WHERE id = $1 AND host_id = $2 AND ended_at IS NULL
       RETURNING id`,
      [id, hostId, sizeBytes, JSON.stringify(titles)],
    );
    if (written.length) return 'recording';
    const [still] = await this.db.query('SELECT id FROM recordings WHERE id = $1', [id]);
    return still ? 'moved' : 'deleted';
  }

  /** Removes every file of a show whose row is gone (a show deleted while it recorded). */
  async removeFiles(serviceId: string, id: string): Promise<void> {
    await removeShowFiles(this.pathOf, serviceId, id);
  }

  /**
   * Ends a show paused past the gap: its duration measured from its audio. A show of one host that is this one is
   * kept in its file; any other is joined (or copied) into a new file, so that no earlier writer can add to it.
   * Two hosts may end the same show at once: the row names the file of the one that ended it first.
   */
  async finish(id: string, hostId: string): Promise<{ sizeBytes: number } | undefined> {
    const [show] = await this.db.query<OpenShow>(
      'SELECT id, service_id, host_id, file_name, parts FROM recordings WHERE id = $1 AND ended_at IS NULL',
      [id],
    );
    if (!show) return undefined;
    const current = this.pathOf(show.service_id, show.file_name);
    const ownFile = show.parts.length === 0 && show.host_id === hostId;
    const fileName = ownFile ? show.file_name : newFileName(show);
    const file = this.pathOf(show.service_id, fileName);
    if (!ownFile) await this.join([...show.parts, { file: show.file_name, bytes: await sizeOf(current) }], show, file);
    const sizeBytes = await sizeOf(file);
    const ended = await this.db.query(
      `UPDATE recordings SET ended_at = coalesce(paused_at, now()), duration_seconds = $4, size_bytes = $5,
         file_name = $3, parts = '[]' WHERE id = $1 AND file_name = $2 AND ended_at IS NULL RETURNING id`,
      [id, show.file_name, fileName, (await audioDuration(file)).toFixed(3), sizeBytes],
    );
    if (ownFile) return ended.length ? { sizeBytes } : undefined;
    const unused = ended.length ? [...show.parts.map((p) => p.file), show.file_name] : [fileName];
    await Promise.all(unused.map((name) => rm(this.pathOf(show.service_id, name), { force: true })));
    return ended.length ? { sizeBytes } : undefined;
  }

  /** Writes the bytes of each part that belong to the show, in order, into `file`. */
  private async join(parts: ShowPart[], show: OpenShow, file: string): Promise<void> {
    const out = createWriteStream(file, { flags: 'wx' });
    try {
      for (const part of parts) {
        const path = this.pathOf(show.service_id, part.file);
        // A part lost from the storage leaves the rest of the show playable; one cut inside a frame loses that frame.
        const bytes = await wholeFramesEnd(path, Math.min(part.bytes, await sizeOf(path)), extensionOf(show.file_name));
        if (bytes > 0) await pipeline(createReadStream(path, { start: 0, end: bytes - 1 }), out, { end: false });
      }
      await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
    } catch (err) {
      out.destroy();
      await rm(file, { force: true });
      throw err;
    }
  }
}

/**
 * Removes every file a show has on the media storage every host shares: the one its row names, the parts earlier
 * hosts wrote and a join in progress (all named `.recording-{id}.…`), whoever wrote them and whether or not a capture
 * still runs somewhere.
 */
export async function removeShowFiles(
  pathOf: (serviceId: string, name: string) => string,
  serviceId: string,
  id: string,
): Promise<void> {
  const dir = dirname(pathOf(serviceId, 'x'));
  const names = await readdir(dir).catch(() => [] as string[]);
  const ours = names.filter((name) => name.startsWith(`.recording-${id}.`));
  await Promise.all(ours.map((name) => rm(join(dir, name), { force: true })));
}

/** A file name of the show no host has written yet (every file of a show starts `.recording-{id}.`). */
function newFileName(show: { id: string; file_name: string }): string {
  return `.recording-${show.id}.${randomBytes(4).toString('hex')}.${extensionOf(show.file_name)}`;
}

const extensionOf = (fileName: string) => fileName.split('.').pop() ?? '';

const sizeOf = (file: string) =>
  stat(file).then(
    (s) => s.size,
    () => 0,
  );
