import { Refunds, RefundStore, RefundWorker, type RefundDeps } from '../../refunds/index.js';
import type { Foundation } from './foundation.js';
import type { StreamingParts } from './streaming-parts.js';

/** Stops and refunds: the owner's stop, and the worker that sends refunds and proves them on chain. */
export function refunding(base: Foundation, parts: StreamingParts) {
  const { config, log, db, live, audit, pay, stream, metrics } = base;
  const leaseSeconds = config.orders.leaseSeconds;
  const deps: RefundDeps = {
    db,
    live,
    audit,
    log,
    metrics,
    store: new RefundStore(db),
    ledger: pay.ledger,
    wallet: pay.refunds.wallet,
    receipts: pay.gateway?.receipts,
    network: pay.checkout.network,
    cutter: {
      admin: () => stream.admin(),
      autodj: parts.autodj,
      relays: parts.relays,
      dropListeners: async (id) => {
        await db.query('DELETE FROM listeners WHERE service_id = $1', [id]);
      },
    },
    settings: {
      maxPerDayAtomic: config.refunds.maxPerDayAtomic,
      provisionTimeoutMs: config.refunds.provisionTimeoutMs,
      leaseSeconds,
      walletMissingReason: pay.refunds.missingReason,
    },
  };
  const worker = new RefundWorker(deps, log, { intervalMs: config.refunds.intervalMs, leaseSeconds });
  return { refunds: new Refunds(deps, () => worker.kick()), worker };
}
