import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, test } from 'node:test';
import { verifySignature } from '../src/events/index.js';
import { buy } from './support/purchase.js';
import { request, startService, type Service } from './support/service.js';
import { startReceiver } from './support/webhook-receiver.js';
import { TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';
import { connectDatabase } from './support/serve-lock.js';

const env = {
  WEBHOOK_ALLOW_INSECURE_LOOPBACK: '1',
  WEBHOOK_POLL_INTERVAL_MS: '200',
  WEBHOOK_SECRETS_KEY: randomBytes(32).toString('base64'),
};
const cleanups: (() => unknown)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function stored(service: Service, id: string): Promise<string> {
  const client = await connectDatabase(service);
  try {
    return (await client.query('SELECT secret FROM webhook_endpoints WHERE id = $1', [id])).rows[0].secret;
  } finally {
    await client.end();
  }
}

async function storeInTheClear(service: Service, id: string, secret: string): Promise<void> {
  const client = await connectDatabase(service);
  await client
    .query('UPDATE webhook_endpoints SET secret = $2 WHERE id = $1', [id, secret])
    .finally(() => client.end());
}

test('webhook secrets are sealed at rest; one stored in the clear before is sealed at start and still signs', async () => {
  let service = await startService(env);
  cleanups.push(() => service.stop());
  const receiver = await startReceiver();
  cleanups.push(() => receiver.close());
  const created = await request(service, 'POST', '/webhooks', { body: { url: receiver.url } });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const { secret, webhook } = created.body as { secret: string; webhook: { id: string } };
  const atRest = await stored(service, webhook.id);
  assert.match(atRest, /^sealed:v1:/);
  assert.ok(!atRest.includes(secret.slice(6)), 'the secret does not appear in the row');

  // As a row written before sealing existed: in the clear. The next start seals it.
  await storeInTheClear(service, webhook.id, secret);
  await service.stop();
  service = await startService(env, { dataDir: service.dataDir });
  assert.match(await stored(service, webhook.id), /^sealed:v1:/);

  const dev = await devFile(service);
  const bought = await buy(service, new TestWallet(dev.buyer.private_key, dev.chain.rpc_url), {
    product_id: 'instant-stream',
    email: 'ops@example.com',
    station_name: 'Sealed FM',
    parameters: { duration_hours: 1, max_listeners: 1, bitrate_kbps: 64 },
  });
  assert.equal(bought.status, 200, JSON.stringify(bought.body));
  const paid = await receiver.next((d) => d.event.type === 'order.paid' && d.event.order_id === bought.body.order.id);
  assert.ok(verifySignature(String(paid.headers['x-agent-audio-signature']), paid.body, secret));
});

test('in production without WEBHOOK_SECRETS_KEY webhooks cannot be registered, and the answer says what to use instead', async () => {
  const prod = await startService({ AUDIO_API_ENV: 'production' });
  cleanups.push(() => prod.stop());
  const { api_key: apiKey } = JSON.parse((await prod.cli(['keys', 'create', '--name', 'prod'])).stdout);
  const refused = await request({ baseUrl: prod.baseUrl, apiKey }, 'POST', '/webhooks', {
    body: { url: 'https://hooks.example.com/x' },
  });
  assert.equal(refused.status, 503, JSON.stringify(refused.body));
  assert.equal(refused.body.error.code, 'webhooks_not_configured');
  assert.match(refused.body.error.message, /WEBHOOK_SECRETS_KEY.*SSE/);
});
