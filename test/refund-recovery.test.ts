import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { DEV_ACCOUNTS, DEV_ROLES, USDC_ADDRESS, USDC_NAME, USDC_VERSION } from '../src/chain/index.js';
import { RefundWallet } from '../src/refunds/index.js';
import { buy } from './support/purchase.js';
import { mintUsdc, usdcBalance } from './support/refund-chain.js';
import { request, scratchDir, startService, type Service } from './support/service.js';
import { exitOf, waitFor } from './support/streaming.js';
import { TestWallet } from './support/wallet.js';
import { chainOwnerDevFile, devFile } from './support/dev-file.js';

const running: Service[] = [];
after(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
});

const body = {
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Crash Refund FM',
  parameters: { duration_hours: 10, max_listeners: 1, bitrate_kbps: 64 },
};
// Nothing tops up the payer or the refund wallet: their balances show exactly what moved, across restarts.
const env = {
  ORDER_LEASE_SECONDS: '1',
  ORDER_RECOVERY_INTERVAL_MS: '200',
  REFUND_INTERVAL_MS: '200',
  DEV_REFUND_FUNDS_ATOMIC: '0',
};

async function start(dataDir: string, extra: Record<string, string> = {}) {
  const service = await startService({ ...env, ...extra }, { dataDir });
  running.push(service);
  return service;
}

// Each crash point has its own data directory, PostgreSQL and chain: the three run at once, their waits overlapping.
describe('a refund survives SIGKILL between its steps and never pays twice', { concurrency: 3 }, () => {
  for (const point of ['refund_after_stop', 'refund_after_broadcast', 'refund_after_proof']) {
    test(`killed at ${point}: after a restart the refund is sent exactly once`, async () => {
      const dataDir = await scratchDir('audio-refund-crash-');
      const doomed = await start(dataDir, { ORDER_CRASH_AT: point });
      const dev = await chainOwnerDevFile(dataDir);
      const payer = DEV_ACCOUNTS[6];
      await mintUsdc(dev.chain.rpc_url, payer.address, 5_000_000n);
      await mintUsdc(dev.chain.rpc_url, dev.refund_wallet.address, 1_000_000n);
      const ordered = await buy(doomed, new TestWallet(payer.privateKey, dev.chain.rpc_url), body);
      assert.equal(ordered.status, 200, JSON.stringify(ordered.body));
      const id = ordered.body.service.service_id;

      const stop = request(doomed, 'POST', `/services/${id}/stop`);
      if (point === 'refund_after_stop')
        await assert.rejects(stop, 'the instance dies right after committing the stop');
      else assert.equal((await stop).status, 200);
      assert.equal(await exitOf(doomed.process, 30_000), null, 'killed by a signal');

      const revived = await start(dataDir);
      const rpc = (await devFile(dataDir)).chain.rpc_url;
      const usage = await waitFor(
        'the refund sent after recovery',
        async () => {
          const u = await request(revived, 'GET', `/services/${id}/usage`);
          return u.body.usage.refund?.status === 'sent' && u.body.usage;
        },
        60_000,
      );
      assert.equal(usage.status, 'expired');
      const amount = BigInt(usage.refund.amount.amount_atomic);
      assert.ok(amount > 199_000n && amount < 200_000n, String(amount));
      assert.equal(
        await usdcBalance(rpc, payer.address),
        5_000_000n - 450_000n + amount,
        'the payer got the refund once',
      );
      assert.equal(
        await usdcBalance(rpc, dev.refund_wallet.address),
        1_000_000n - amount,
        'the refund wallet paid it once',
      );

      // A second send of the same refund (a second worker, a lost record) is refused by the token itself.
      const wallet = new RefundWallet({
        rpcUrl: rpc,
        chainId: 8453,
        token: USDC_ADDRESS,
        privateKey: DEV_ROLES.refunds.privateKey,
        tokenName: USDC_NAME,
        tokenVersion: USDC_VERSION,
      });
      const [row] = JSON.parse((await revived.cli(['refunds', 'list'])).stdout);
      assert.equal(row.status, 'sent');
      const { refundNonce } = await import('../src/refunds/index.js');
      await assert.rejects(
        wallet.send(payer.address, amount, refundNonce(row.id)),
        /authorization is used or canceled|reverted/i,
      );
      assert.equal(await usdcBalance(rpc, payer.address), 5_000_000n - 450_000n + amount, 'still once');
      await revived.stop();
    });
  }
});
