import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { buy } from './purchase.js';
import type { Service } from './service.js';
import { TestWallet } from './wallet.js';

/** An instant-stream bought with the development buyer's wallet; its service record. */
export async function buyInstantStream(service: Service, stationName: string, parameters: Record<string, unknown>) {
  const dev = JSON.parse(await readFile(join(service.dataDir, 'dev.json'), 'utf8'));
  const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const bought = await buy(service, wallet, {
    product_id: 'instant-stream',
    email: 'ops@example.com',
    station_name: stationName,
    parameters,
  });
  assert.equal(bought.status, 200, JSON.stringify(bought.body));
  return bought.body.service;
}
