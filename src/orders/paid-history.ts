import type { CapacityReserve } from '../catalog/index.js';
import { atomicToAmount } from '../rules/index.js';
import { Database, type Client } from '../store/index.js';

/** What a wallet has paid before, as the capacity reserve's rules read it (USD, 6 decimals). */
export interface PaidHistory {
  paid: string;
  /** Who the amount is for, as a refusal names it: the paying wallet, or the best wallet of an API key. */
  who: string;
}

// A wallet's history, $1 the wallet, $2 the age in seconds. Only what the chain proved counts (an order is settled
// with its Transfer proof) and only what was delivered (state active); refunds are taken off however recent, and a
// stop still being computed takes off everything its service was paid. Keys and wallets are free; this is not.
const WALLET_PAID = (wallet: string) => `
  (SELECT COALESCE(sum(o.amount_atomic), 0) FROM orders o
    WHERE o.payer = ${wallet} AND o.state = 'active' AND o.settled_at <= now() - make_interval(secs => $2))
  - (SELECT COALESCE(sum(r.amount_atomic), 0) FROM refunds r
      WHERE lower(r.payer) = ${wallet} AND r.status IN ('pending', 'sent'))
  - (SELECT COALESCE(sum(o.amount_atomic), 0) FROM refunds r JOIN services s ON s.id = r.service_id
       JOIN orders o ON o.id = s.order_id OR o.upgrade_of = s.id OR o.extension_of = s.id
      WHERE r.status = 'computing' AND s.payer = ${wallet} AND o.payer = ${wallet} AND o.state = 'active')`;

const PAYER_SQL = `SELECT (${WALLET_PAID('$1')})::text AS paid_atomic, $1 AS wallet`;

// Before payment the paying wallet is unknown: the best of the wallet the key was issued to (proven by sign-in) and
// the wallets that paid its orders.
const KEY_SQL = `
  WITH wallets AS (
    SELECT wallet_address AS wallet FROM api_keys WHERE id = $1 AND wallet_address IS NOT NULL
    UNION SELECT DISTINCT payer FROM orders WHERE api_key_id = $1 AND state = 'active')
  SELECT paid.atomic::text AS paid_atomic, w.wallet
    FROM wallets w, LATERAL (SELECT ${WALLET_PAID('w.wallet')} AS atomic) paid
   ORDER BY paid.atomic DESC LIMIT 1`;

/**
 * What the paying wallet has paid, settled at least the reserve's hours ago and less refunds: in the claim's
 * transaction once the payment is verified, from the pool for the wallet a payment sent along names.
 */
export async function payerHistory(
  db: Database | Client,
  reserve: CapacityReserve,
  payer: string,
): Promise<PaidHistory> {
  const params = [payer.toLowerCase(), ageSeconds(reserve)];
  const [row] = db instanceof Database ? await db.query(PAYER_SQL, params) : (await db.query(PAYER_SQL, params)).rows;
  return { paid: usd(row.paid_atomic), who: `the paying wallet ${payer.toLowerCase()}` };
}

/** Before payment is asked: the best history among the wallets an API key is known to pay with. */
export async function keyHistory(db: Database, reserve: CapacityReserve, apiKeyId: string): Promise<PaidHistory> {
  const [row] = await db.query(KEY_SQL, [apiKeyId, ageSeconds(reserve)]);
  if (!row) return { paid: '0', who: 'no wallet this API key was issued to or paid with' };
  return { paid: usd(row.paid_atomic), who: `the best wallet of this API key (${row.wallet as string})` };
}

function ageSeconds(reserve: CapacityReserve): number {
  return reserve.established_payer.paid_hours_ago * 3600;
}

/** USD from atomic USDC. Refunds of payments younger than the age may take a history below zero: shown as zero. */
function usd(atomic: unknown): string {
  const text = String(atomic);
  return text.startsWith('-') ? '0' : atomicToAmount(text, 6);
}
