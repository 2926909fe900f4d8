// Buys a 1-hour instant-stream as an agent would: the official x402 client pays the 402 answer on the local chain.
// Needs `npm start` running (it writes DATA_DIR/dev.json with the API key and a funded buyer wallet).
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { x402Client } from '@x402/core/client';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { privateKeyToAccount } from 'viem/accounts';

const devFile = join(resolve(process.env.DATA_DIR ?? './data'), 'dev.json');
const dev = JSON.parse(
  await readFile(devFile, 'utf8').catch(() => {
    throw new Error(`${devFile} not found: start the service first with npm start`);
  }),
) as { base_url: string; api_key: string; buyer?: { private_key: `0x${string}` } };
if (!dev.buyer) throw new Error('dev.json has no buyer wallet: the service runs without an embedded chain');

const client = registerExactEvmScheme(new x402Client(), { signer: privateKeyToAccount(dev.buyer.private_key) });
client.setSpendControls({ maxAmountPerPayment: '$1' });
const payingFetch = wrapFetchWithPayment(fetch, client);

const response = await payingFetch(`${dev.base_url}/orders`, {
  method: 'POST',
  headers: {
    'content-type': 'application/json',
    authorization: `Bearer ${dev.api_key}`,
    'idempotency-key': randomUUID(),
  },
  body: JSON.stringify({
    product_id: 'instant-stream',
    email: 'demo-agent@example.com',
    station_name: 'Demo Station',
    parameters: { duration_hours: 1, max_listeners: 10, bitrate_kbps: 128 },
  }),
});
const body = (await response.json()) as {
  ok: boolean;
  order: { id: string; amount: { amount: string } };
  service: { stream_url: string; broadcast_url: string; expires_at: string };
  error?: { code: string; message: string };
};
if (!response.ok) {
  console.error(`order failed: ${response.status} ${body.error?.code}: ${body.error?.message}`);
  process.exit(1);
}
const settlement = decodePaymentResponseHeader(response.headers.get('payment-response')!);
console.log(
  `order      ${body.order.id} paid ${body.order.amount.amount} USDC (transaction ${settlement.transaction})`,
);
console.log(`listen     ${body.service.stream_url}`);
console.log(`broadcast  ${body.service.broadcast_url}`);
console.log(`expires    ${body.service.expires_at}`);
console.log(
  `\ntry it:    ffmpeg -re -f lavfi -i sine=frequency=440 -c:a libmp3lame -b:a 128k -content_type audio/mpeg -f mp3 '${body.service.broadcast_url}'`,
);
