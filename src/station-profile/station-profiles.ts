import { rename, rm, mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { randomId } from '../ids/index.js';
import type { Database } from '../store/index.js';
import { artworkFileOf, type CheckedArtwork } from './artwork.js';
import type { ArtworkType } from './image-facts.js';

/** The artwork of a station as its page and the owner's routes describe it. */
export interface StoredArtwork {
  /** The public name: `{hash}.{ext}`. */
  name: string;
  content_type: ArtworkType;
  size_bytes: number;
  width: number;
  height: number;
}

/** What the owner set; null is "as the order said" (its station_name, metadata.station_description and show_time_left). */
export interface StationProfile {
  name: string | null;
  description: string | null;
  show_time_left: boolean | null;
  artwork: StoredArtwork | null;
}

export type ProfileChanges = Partial<Pick<StationProfile, 'name' | 'description' | 'show_time_left'>>;

/** Where a service's media files are (the AutoDJ media directory of that service). */
export type MediaPath = (serviceId: string, name: string) => string;

interface ProfileRow extends Record<string, unknown> {
  name: string | null;
  description: string | null;
  show_time_left: boolean | null;
  artwork_file: string | null;
  artwork_type: ArtworkType | null;
  artwork_bytes: number | null;
  artwork_width: number | null;
  artwork_height: number | null;
}

const COLUMNS =
  'name, description, show_time_left, artwork_file, artwork_type, artwork_bytes, artwork_width, artwork_height';
// Written by a crashed upload, such a file is removed at the next start with AutoDJ's partial uploads.
const PARTIAL_PREFIX = '.upload-artwork-';
const EMPTY: StationProfile = { name: null, description: null, show_time_left: null, artwork: null };

const profileOf = (row: ProfileRow | undefined): StationProfile =>
  row
    ? {
        name: row.name,
        description: row.description,
        show_time_left: row.show_time_left,
        artwork: row.artwork_file
          ? {
              name: row.artwork_file.replace(/^\.artwork-/, ''),
              content_type: row.artwork_type!,
              size_bytes: row.artwork_bytes!,
              width: row.artwork_width!,
              height: row.artwork_height!,
            }
          : null,
      }
    : { ...EMPTY };

/** Station profiles: a row per service, the artwork's bytes beside the service's media. */
export class StationProfiles {
  constructor(private readonly db: Database) {}

  async get(serviceId: string): Promise<StationProfile> {
    const [row] = await this.db.query<ProfileRow>(`SELECT ${COLUMNS} FROM station_profiles WHERE service_id = $1`, [
      serviceId,
    ]);
    return profileOf(row);
  }

  /** Sets the fields given (null: back to the order's); the others stay. */
  async update(serviceId: string, changes: ProfileChanges): Promise<StationProfile> {
    const fields = (['name', 'description', 'show_time_left'] as const).filter((f) => changes[f] !== undefined);
    const sets = fields.map((f, i) => `${f} = $${i + 2}`).concat('updated_at = now()');
    await this.db.query('INSERT INTO station_profiles (service_id) VALUES ($1) ON CONFLICT DO NOTHING', [serviceId]);
    const [row] = await this.db.query<ProfileRow>(
      `UPDATE station_profiles SET ${sets.join(', ')} WHERE service_id = $1 RETURNING ${COLUMNS}`,
      [serviceId, ...fields.map((f) => changes[f])],
    );
    return profileOf(row);
  }

  /** Keeps a checked image as the artwork: written whole beside the media, then named in the row; the old one removed. */
  async setArtwork(serviceId: string, image: CheckedArtwork, pathOf: MediaPath): Promise<StationProfile> {
    const partial = pathOf(serviceId, `${PARTIAL_PREFIX}${randomId('', 9)}`);
    await mkdir(dirname(partial), { recursive: true });
    try {
      await writeFile(partial, image.bytes);
      await rename(partial, pathOf(serviceId, artworkFileOf(image.name)));
    } finally {
      await rm(partial, { force: true });
    }
    const artwork = [artworkFileOf(image.name), image.type, image.bytes.length, image.width, image.height];
    return this.replaceArtwork(serviceId, artwork, pathOf);
  }

  async removeArtwork(serviceId: string, pathOf: MediaPath): Promise<StationProfile> {
    return this.replaceArtwork(serviceId, [null, null, null, null, null], pathOf);
  }

  private async replaceArtwork(serviceId: string, artwork: unknown[], pathOf: MediaPath): Promise<StationProfile> {
    const { row, previous } = await this.db.transaction(async (client) => {
      await client.query('INSERT INTO station_profiles (service_id) VALUES ($1) ON CONFLICT DO NOTHING', [serviceId]);
      const before = await client.query('SELECT artwork_file FROM station_profiles WHERE service_id = $1 FOR UPDATE', [
        serviceId,
      ]);
      const after = await client.query<ProfileRow>(
        `UPDATE station_profiles SET artwork_file = $2, artwork_type = $3, artwork_bytes = $4, artwork_width = $5,
           artwork_height = $6, updated_at = now() WHERE service_id = $1 RETURNING ${COLUMNS}`,
        [serviceId, ...artwork],
      );
      return { row: after.rows[0], previous: before.rows[0]?.artwork_file as string | null };
    });
    if (previous && previous !== row.artwork_file) await rm(pathOf(serviceId, previous), { force: true });
    return profileOf(row);
  }
}
