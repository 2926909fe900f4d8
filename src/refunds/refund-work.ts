import type { Database } from '../store/index.js';

/** Which of the refund worker's kinds of work there may be now. */
export interface RefundWork {
  /** Paid orders still provisioning (those past the bound, or whose service was stopped, are refunded). */
  provisioning: boolean;
  /** Failed orders not looked up on chain yet. */
  unchecked: boolean;
  /** Refunds to compute or send, not leased by another pass. */
  due: boolean;
}

/**
 * The refund worker's look for work, in one statement: at rest a pass asks nothing more of PostgreSQL than this.
 * Each flag covers the rows its own query would find, or more.
 */
export async function refundWork(db: Database): Promise<RefundWork> {
  const [row] = await db.query<RefundWork & Record<string, unknown>>(
    `SELECT EXISTS (SELECT 1 FROM orders WHERE state = 'provisioning') AS provisioning,
            EXISTS (SELECT 1 FROM orders WHERE state = 'failed' AND chain_checked_at IS NULL) AS unchecked,
            EXISTS (SELECT 1 FROM refunds
                     WHERE (status = 'computing' OR (status = 'pending' AND (NOT needs_approval OR approved_at IS NOT NULL)
                            AND next_attempt_at <= now()))
                       AND (lease_until IS NULL OR lease_until < now())) AS due`,
  );
  return row;
}
