import { mkdir, rm, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { PUBLISHED_PLAYLIST } from './rendition.js';

/**
 * The sessions nginx answers itself: {sessionsDir}/{service_id}/{token}.m3u8, a link to the rendition's shared
 * playlist (hls-playlist-config.ts). A link exists only while its session holds a place: removed, the session's next
 * fetch reaches serve, which refuses or admits it again. A link to a rendition that stopped leads nowhere, so serve
 * answers then too.
 */
export class SessionLinks {
  constructor(
    private readonly sessionsDir: string,
    private readonly hlsDir: string,
  ) {}

  /** Removes every link (a previous run's sessions, or a host that lost its lease). */
  async clear(): Promise<void> {
    await rm(this.sessionsDir, { recursive: true, force: true });
    await mkdir(this.sessionsDir, { recursive: true, mode: 0o755 });
  }

  async open(serviceId: string, token: string): Promise<void> {
    const dir = join(this.sessionsDir, serviceId);
    await mkdir(dir, { recursive: true, mode: 0o755 });
    const target = join(this.hlsDir, serviceId, PUBLISHED_PLAYLIST);
    await symlink(target, join(dir, `${token}.m3u8`)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
  }

  async close(serviceId: string, token: string): Promise<void> {
    await rm(join(this.sessionsDir, serviceId, `${token}.m3u8`), { force: true });
  }

  async closeService(serviceId: string): Promise<void> {
    await rm(join(this.sessionsDir, serviceId), { recursive: true, force: true });
  }
}
