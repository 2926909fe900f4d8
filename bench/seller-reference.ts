/**
 * The paid-purchase reference as the bench drives it: bench/x402-express-seller-ref.ts in a process of its own, on
 * the service's anvil and embedded PostgreSQL, and its purchases, each paid for its own 402 by the official client.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import type { PaymentRequirements } from '@x402/core/types';
import { DEV_ACCOUNTS, DEV_ROLES } from '../src/chain/accounts.js';
import type { TestWallet } from '../test/support/wallet.js';
import { startChildScript, type ChildServer } from './child-script.js';
import { pool } from './pool.js';

/** Pays the reference's gas: not the service's facilitator (DEV_ROLES), nor the bench's bare facilitator (4). */
export const SELLER_REFERENCE_GAS_ACCOUNT = 5;
/** The bare facilitator's gas account in bench/orders.ts. */
export const BARE_FACILITATOR_GAS_ACCOUNT = 4;

export interface SellerReference {
  pid: number;
  /** Each purchase: its own 402 from the reference and a PAYMENT-SIGNATURE for it. */
  sign(n: number, signal: AbortSignal): Promise<string[]>;
  /** One paid POST /orders; undefined on success (200, an active order, a successful PAYMENT-RESPONSE). */
  buy(signature: string, signal: AbortSignal): Promise<string | undefined>;
  /** The order rows the reference committed so far. */
  committedOrders(): Promise<number>;
  stop(): Promise<void>;
}

export interface SellerReferenceOptions {
  root: string;
  /** The service's DATA_DIR: its serve.lock names the embedded PostgreSQL. */
  dataDir: string;
  rpcUrl: string;
  chainId: number;
  /** The service's payment terms, which the reference must ask for too. */
  terms: PaymentRequirements;
  wallet: TestWallet;
  body: string;
}

const used = [DEV_ROLES.facilitator, DEV_ROLES.payTo, DEV_ROLES.buyer, DEV_ROLES.minter, DEV_ROLES.refunds];
used.push(DEV_ACCOUNTS[BARE_FACILITATOR_GAS_ACCOUNT]);
const gasAddress = DEV_ACCOUNTS[SELLER_REFERENCE_GAS_ACCOUNT].address;
assert.ok(!used.some((a) => a.address === gasAddress), 'the reference would pay gas from an account in use');

export async function startSellerReference(o: SellerReferenceOptions): Promise<SellerReference> {
  const lock = JSON.parse(await readFile(join(o.dataDir, 'serve.lock'), 'utf8')) as { database_url?: string };
  if (!lock.database_url) throw new Error('serve.lock names no embedded PostgreSQL: the seller reference needs one');
  const child: ChildServer = await startChildScript(
    o.root,
    'bench/x402-express-seller-ref.ts',
    [o.terms.payTo, o.rpcUrl, String(o.chainId), lock.database_url, String(SELLER_REFERENCE_GAS_ACCOUNT)],
    120_000,
  ); // it loads viem and the x402 packages: slow to start on a busy machine
  const url = `${child.baseUrl}/orders`;
  // A time limit on paid requests only: each AbortSignal.any() adds a listener to `signal` until it is collected.
  const post = (signal: AbortSignal, signature?: string) =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(signature && { 'payment-signature': signature }) },
      body: o.body,
      signal: signature ? AbortSignal.any([signal, AbortSignal.timeout(30_000)]) : signal,
    });
  const ask402 = async (signal: AbortSignal) => {
    const r = await post(signal);
    const required = r.headers.get('payment-required');
    const text = await r.text();
    if (r.status !== 402 || !required) throw new Error(`the seller reference answered ${r.status} unpaid: ${text}`);
    return required;
  };
  try {
    const accepted = decodePaymentRequiredHeader(await ask402(AbortSignal.timeout(30_000))).accepts[0];
    const terms = (a: PaymentRequirements) => ({
      scheme: a.scheme,
      network: a.network,
      amount: a.amount,
      asset: a.asset,
      payTo: a.payTo,
      maxTimeoutSeconds: a.maxTimeoutSeconds,
      extra: a.extra,
    });
    assert.deepEqual(terms(accepted), terms(o.terms), 'the seller reference and the service ask for other terms');
  } catch (e) {
    await child.stop();
    throw e;
  }
  return {
    pid: child.pid,
    sign: (n, signal) =>
      pool(
        Array.from({ length: n }, (_, i) => i),
        4,
        async () => {
          signal.throwIfAborted();
          return o.wallet.pay(await ask402(signal));
        },
      ),
    async buy(signature, signal) {
      const r = await post(signal, signature);
      const body = (await r.json().catch(() => undefined)) as { ok?: boolean; order?: { status?: string } } | undefined;
      const receipt = r.headers.get('payment-response');
      const settled = receipt ? decodePaymentResponseHeader(receipt).success : false;
      if (r.status === 200 && body?.ok === true && body.order?.status === 'active' && settled) return undefined;
      return `reference ${r.status} ${body?.order?.status ?? ''}${settled ? '' : ' unsettled'}`.trim();
    },
    async committedOrders() {
      const r = await fetch(`${child.baseUrl}/stats`, { signal: AbortSignal.timeout(30_000) });
      return ((await r.json()) as { orders: number }).orders;
    },
    stop: () => child.stop(),
  };
}
