import assert from 'node:assert/strict';
import { buy } from './purchase.js';
import type { Service } from './service.js';
import { buyerWallet } from './dev-file.js';

/** An instant-stream bought with the development buyer's wallet; its service record. */
export async function buyInstantStream(service: Service, stationName: string, parameters: Record<string, unknown>) {
  const wallet = await buyerWallet(service);
  const bought = await buy(service, wallet, {
    product_id: 'instant-stream',
    email: 'ops@example.com',
    station_name: stationName,
    parameters,
  });
  assert.equal(bought.status, 200, JSON.stringify(bought.body));
  return bought.body.service;
}

/** Any order bought with the development buyer's wallet, which must succeed; the service it created. */
export async function boughtService(service: Service, order: Record<string, unknown>) {
  const bought = await buy(service, await buyerWallet(service), order);
  assert.equal(bought.status, 200, JSON.stringify(bought.body));
  return bought.body.service;
}
