import type { Logger } from '../log/index.js';
import type { AuthorizationLedger, OfferReceipts } from '../payments/index.js';
import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import type { Database } from '../store/index.js';
import type { MountCutter } from './mount-cut.js';
import type { RefundStore } from './refund-store.js';
import type { RefundWallet } from './refund-wallet.js';

export interface RefundSettings {
  /** Refunds above this (atomic USDC, over the last 24 hours with those already sent) wait for an operator. */
  maxPerDayAtomic?: bigint;
  /** A paid order not provisioned after this long is refunded in full. */
  provisionTimeoutMs: number;
  /** How long an instance holds a refund it works on; a killed instance's refunds are taken over after it. */
  leaseSeconds: number;
  /** Why refunds cannot be sent from this instance (no refund wallet), shown while they wait. */
  walletMissingReason?: string;
}

export interface RefundDeps {
  db: Database;
  store: RefundStore;
  live: LiveSnapshot;
  audit: { saveSnapshot(snapshot: { hash: string; files: Record<string, string> }): Promise<void> };
  /** Proves payments and refunds from the token's logs; saves the embedded chain's state. */
  ledger?: AuthorizationLedger;
  wallet?: RefundWallet;
  receipts?: OfferReceipts;
  cutter: MountCutter;
  network: string;
  settings: RefundSettings;
  log: Logger;
  metrics?: {
    refunds: { inc(labels: { result: string }): void };
    refundWalletShort: { inc(labels: { lacks: string }): void };
  };
}
