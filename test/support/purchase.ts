import { randomUUID } from 'node:crypto';
import type { Service } from './service.js';
import type { TestWallet } from './wallet.js';

/** An order paid the way an agent pays: @x402/fetch answers the 402 with a signed payment. */
export function buy(
  service: Pick<Service, 'baseUrl' | 'apiKey'>,
  wallet: TestWallet,
  body: Record<string, unknown>,
  key: string = randomUUID(),
  sent: string[] = [],
) {
  return payFor(service, wallet, '/orders', body, key, sent);
}

/** A POST to any paid operation (an order, an upgrade), paid with @x402/fetch. */
export async function payFor(
  service: Pick<Service, 'baseUrl' | 'apiKey'>,
  wallet: TestWallet,
  path: string,
  body: Record<string, unknown>,
  key: string = randomUUID(),
  sent: string[] = [],
) {
  const pay = wallet.payingFetch(sent);
  const response = await pay(`${service.baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${service.apiKey}`, 'idempotency-key': key },
    body: JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as any };
}
