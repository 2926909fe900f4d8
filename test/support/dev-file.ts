import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Payments } from '../../src/cli/payments.js';
import { TestWallet } from './wallet.js';

type DevPayments = NonNullable<Payments['dev']>;

/**
 * What serve writes to DATA_DIR/dev.json in development: its base URL and agent API key next to the payments' dev
 * part (the chain, the funded buyer, the refund wallet when this instance started the chain). The buyer's fields are
 * the viem hex strings a wallet is built from.
 */
export type DevFile = Omit<DevPayments, 'buyer'> & {
  base_url: string;
  api_key: string;
  buyer: { [K in keyof DevPayments['buyer']]: `0x${string}` };
};

/** The dev.json of a running development service (or of its data folder). */
export async function devFile(from: { dataDir: string } | string): Promise<DevFile> {
  const dataDir = typeof from === 'string' ? from : from.dataDir;
  return JSON.parse(await readFile(join(dataDir, 'dev.json'), 'utf8')) as DevFile;
}

/** The funded buyer of a development service's chain, as an agent's wallet. */
export async function buyerWallet(from: { dataDir: string } | string): Promise<TestWallet> {
  const dev = await devFile(from);
  return new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
}

/** The dev.json of a service that started the chain itself, which names the refund wallet it funded. */
export async function chainOwnerDevFile(from: { dataDir: string } | string): Promise<Required<DevFile>> {
  const { refund_wallet, ...dev } = await devFile(from);
  if (!refund_wallet) throw new Error('dev.json names no refund wallet: this service attached to another chain');
  return { ...dev, refund_wallet };
}
