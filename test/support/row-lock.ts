import type pg from 'pg';
import { waitFor } from './streaming.js';

/** Until a claim (its `FROM services WHERE id = $1 FOR UPDATE`) waits for a service row another transaction holds. */
export async function claimWaitsForServiceRow(db: pg.Client, timeoutMs: number): Promise<void> {
  await waitFor(
    'the claim to wait for the service row',
    async () =>
      (
        await db.query(
          "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FROM services WHERE id = $1 FOR UPDATE%'",
        )
      ).rows.length > 0,
    timeoutMs,
  );
}
