import type { Service } from './service.js';
import { connectDatabase } from './serve-lock.js';

/**
 * Moves a service's paid end to `seconds` from now in its database, as a clock running faster would: the tests of what
 * happens at expiry buy a service long enough for their setup on a loaded machine, then let it end soon, instead of
 * buying seconds and waiting them out (or racing them). The change notifies the running service as any expiry change
 * does (migration 051); the life-cycle worker, the event watch and HLS read expires_at from the database.
 */
export async function expireIn(service: Pick<Service, 'dataDir'>, serviceId: string, seconds: number): Promise<Date> {
  const client = await connectDatabase(service);
  try {
    const { rows } = await client.query<{ expires_at: Date }>(
      // Whole milliseconds, as the API and the events write it.
      `UPDATE services SET expires_at = date_trunc('milliseconds', now() + make_interval(secs => $2))
        WHERE id = $1 RETURNING expires_at`,
      [serviceId, seconds],
    );
    if (rows.length !== 1) throw new Error(`no service ${serviceId} to move the expiry of`);
    return rows[0].expires_at;
  } finally {
    await client.end();
  }
}
