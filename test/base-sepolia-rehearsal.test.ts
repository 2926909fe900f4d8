import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createPublicClient, http, parseAbi } from 'viem';
import { USDC_NETWORKS } from '../src/chain/networks.js';
import { buy } from './support/purchase.js';
import { request, startService, type Service } from './support/service.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';
import { devFile, type DevFile } from './support/dev-file.js';

/**
 * Development rehearsing on Base Sepolia (X402_NETWORK=base-sepolia): the embedded chain runs as chain id 84532 with
 * the token at Base Sepolia's USDC address answering that network's EIP-712 name ("USDC", where Base's is "USD Coin"),
 * and an agent pays with the official x402 client for those terms.
 */

const sepolia = USDC_NETWORKS['base-sepolia'];
const token = parseAbi(['function name() view returns (string)', 'function balanceOf(address) view returns (uint256)']);
const ORDER = {
  product_id: 'instant-stream',
  email: 'rehearsal@example.com',
  station_name: 'Rehearsal FM',
  parameters: { duration_hours: 1, max_listeners: 5, bitrate_kbps: 64 },
};

let service: Service;
let dev: DevFile;

before(async () => {
  service = await startService({ X402_NETWORK: 'base-sepolia' });
  dev = await devFile(service);
});
after(() => service?.stop());

test('the embedded chain runs as Base Sepolia: its chain id, its USDC address and name', async () => {
  assert.equal(dev.chain.chain_id, 84532);
  const chain = createPublicClient({ transport: http(dev.chain.rpc_url) });
  assert.equal(await chain.getChainId(), 84532);
  assert.equal(await chain.readContract({ address: sepolia.usdc, abi: token, functionName: 'name' }), 'USDC');
  const base = USDC_NETWORKS.base.usdc;
  assert.equal(await chain.getCode({ address: base }), undefined, 'no token at the Base address');
});

test('the 402 names Base Sepolia, and a paid order is charged there, exactly its price', async () => {
  const quote = await request(service, 'POST', '/orders', {
    body: ORDER,
    headers: { 'idempotency-key': 'rehearsal-quote' },
  });
  assert.equal(quote.status, 402);
  const required = decodePaymentRequiredHeader(quote.headers.get('payment-required')!);
  const terms = required.accepts[0];
  assert.equal(terms.network, 'eip155:84532');
  assert.equal(terms.asset.toLowerCase(), sepolia.usdc.toLowerCase());
  assert.deepEqual(terms.extra, { name: 'USDC', version: '2' });

  const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const before = await wallet.balanceOf(sepolia.usdc, wallet.address);
  const paid = await buy(service, wallet, ORDER);
  assert.equal(paid.status, 200, JSON.stringify(paid.body));
  assert.equal(paid.body.order.payment.network, 'eip155:84532');
  const spent = before - (await wallet.balanceOf(sepolia.usdc, wallet.address));
  assert.equal(spent, BigInt(terms.amount));
});
