import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import type { PaymentRequirements } from '@x402/core/types';
import { namedTreesCpu, treeCpu } from '../bench/process-cpu.js';
import { startSellerReference, type SellerReference } from '../bench/seller-reference.js';
import { root, startService, type Service } from './support/service.js';
import { TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';

// The benchmark's paid-purchase reference (a seller on @x402/express that commits each order), on a real service's
// chain and PostgreSQL: it must really settle and really commit, or the ratio against it means nothing.

const body = JSON.stringify({
  product_id: 'instant-stream',
  email: 'a@example.com',
  station_name: 'Bench',
  parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
});

let service: Service;
let seller: SellerReference | undefined;
let wallet: TestWallet;
let terms: PaymentRequirements;

before(async () => {
  service = await startService();
  const dev = await devFile(service);
  wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const unpaid = await fetch(`${service.baseUrl}/orders`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${service.apiKey}`,
      'idempotency-key': 'seller-ref-terms',
    },
    body,
  });
  await unpaid.text();
  assert.equal(unpaid.status, 402);
  terms = decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!).accepts[0];
  seller = await startSellerReference({
    root,
    dataDir: service.dataDir,
    rpcUrl: dev.chain.rpc_url,
    chainId: dev.chain.chain_id,
    terms,
    wallet,
    body,
  });
});

after(async () => {
  await seller?.stop();
  await service?.stop();
});

test('each paid purchase of the seller reference settles on the chain and commits one order row', async () => {
  const signal = AbortSignal.timeout(120_000);
  const paidBefore = await wallet.balanceOf(terms.asset, terms.payTo);
  const rowsBefore = await seller!.committedOrders();
  const signatures = await seller!.sign(2, signal);
  for (const signature of signatures) assert.equal(await seller!.buy(signature, signal), undefined);
  assert.equal(await seller!.committedOrders(), rowsBefore + 2);
  assert.equal(await wallet.balanceOf(terms.asset, terms.payTo), paidBefore + 2n * BigInt(terms.amount));

  // A payment already spent is refused before the handler runs: no row without a payment.
  assert.match((await seller!.buy(signatures[0], signal)) ?? '', /^reference 402/);
  assert.equal(await seller!.committedOrders(), rowsBefore + 2);
});

test("the reference's CPU counts serve's PostgreSQL and anvil, not serve itself", async () => {
  const backing = await namedTreesCpu(service.process.pid!, ['postgres', 'anvil']);
  const tree = await treeCpu(service.process.pid!);
  assert.ok(backing !== undefined && tree, 'no /proc figures for serve');
  assert.ok(backing > 0, 'serve has no PostgreSQL or anvil below it');
  // Compared in clock ticks (1/100 s): the two sums add the same ticks in another order (0.08 against 0.0799…).
  const ticks = (seconds: number) => Math.round(seconds * 100);
  assert.ok(
    ticks(backing) <= ticks(tree.descendants),
    `${backing} s is more than serve's descendants' ${tree.descendants} s`,
  );
});
