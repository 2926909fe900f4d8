import type { Database } from '../store/index.js';

/**
 * Records where a streaming host (one Icecast, by its stable id) is reached now. Its services' stream and broadcast
 * addresses are derived from this when read, so they follow the host when its address changes.
 */
export async function registerStreamingHost(db: Database, hostId: string, publicUrl: string): Promise<void> {
  await db.query(
    `INSERT INTO streaming_hosts (id, public_url) VALUES ($1, $2)
     ON CONFLICT (id) DO UPDATE SET public_url = $2, updated_at = now()`,
    [hostId, publicUrl],
  );
  // Services sold before hosts had ids (migration 009 gave them a host per address) join the host now at that address.
  await db.query("UPDATE services SET host_id = $1 WHERE host_id = 'url:' || $2::text AND icecast_url = $2", [
    hostId,
    publicUrl,
  ]);
}
