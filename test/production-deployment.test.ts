import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Database, startEmbeddedPostgres, type RunningPostgres } from '../src/store/index.js';
import { freePort } from '../src/store/free-port.js';
import { buy, payFor } from './support/purchase.js';
import {
  orderWhen,
  ROLES,
  SMALL_STREAM,
  startChain,
  startFacilitator,
  startFacilitatorSwitch,
  startProduction,
  type Chain,
} from './support/production.js';
import { request, scratchDir, startService, type Service } from './support/service.js';
import { openSse } from './support/sse.js';
import { connectListener, exitOf, startFfmpegSource, waitFor } from './support/streaming.js';
import { copyTemplateCluster } from './support/template-data-dir.js';
import { tone } from './support/tones.js';
import { authorizationOf, TestWallet } from './support/wallet.js';

/**
 * The deployment an operator makes: an external PostgreSQL, an API instance (`serve --role api`) and a streaming host
 * (`serve --role host`) in production mode, a facilitator over HTTP, a chain over RPC, and an agent paying with
 * @x402/fetch. Every sale, extension, stop and refund is checked on the token.
 */

let chain: Chain;
let postgres: RunningPostgres;
let api: Service;
let host: Service;
let wallet: TestWallet;
let switchTo: (url: string) => void;
let listenPort: number;
const cleanups: Array<() => Promise<unknown>> = [];

const shared = (media: string) => ({
  DATABASE_URL: postgres.url,
  MEDIA_DIR: media,
  WEBHOOK_SECRETS_KEY: Buffer.alloc(32, 7).toString('base64'),
  HOST_HEARTBEAT_MS: '500',
});

before(
  async () => {
    chain = await startChain();
    const pgDir = await scratchDir('audio-prod-pg-');
    await copyTemplateCluster(pgDir, 'bare');
    postgres = await startEmbeddedPostgres(pgDir);
    const media = await scratchDir('audio-prod-media-');
    const facilitatorSwitch = await startFacilitatorSwitch();
    cleanups.push(() => facilitatorSwitch.close());
    switchTo = facilitatorSwitch.setUpstream;
    const facilitator = await startFacilitator(chain.rpcUrl);
    cleanups.push(() => facilitator.stop());
    switchTo(facilitator.url);
    api = await startProduction(chain, facilitatorSwitch.url, shared(media), undefined, ['--role', 'api']);
    cleanups.push(() => api.stop());
    listenPort = await freePort('127.0.0.1');
    host = await startService(
      {
        AUDIO_API_ENV: 'production',
        ...shared(media),
        STREAMING_HOST_ID: 'prod-host-a',
        ICECAST_LISTEN: `127.0.0.1:${listenPort}`,
      },
      { args: ['--role', 'host'] },
    );
    cleanups.push(() => host.stop());
    await chain.chain.ensureFunded(ROLES.buyers[0].address, 100_000_000n);
    wallet = new TestWallet(ROLES.buyers[0].privateKey, chain.rpcUrl);
  },
  { timeout: 120_000 },
);

after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
  await postgres?.stop();
  await chain?.stop();
});

const balance = (address: string) => chain.chain.usdcBalance(address as `0x${string}`);

describe('production: an API and a streaming host over an external PostgreSQL, paid through a facilitator over HTTP', () => {
  let bought: any;

  test('an agent buys a stream; it is placed on the host and carried at the address the host listens on', async () => {
    // The host registers with its heartbeat: until then there is no capacity to sell.
    await waitFor(
      'the streaming host registered',
      async () => (await request(api, 'GET', '/availability')).body?.agent_checkout?.available === true || undefined,
      20_000,
    );
    const quoted = await request(api, 'POST', '/quotes', {
      body: { product_id: SMALL_STREAM.product_id, parameters: SMALL_STREAM.parameters },
    });
    assert.equal(quoted.status, 200, JSON.stringify(quoted.body));
    const quote = quoted.body.quote;
    const sellerBefore = await balance(ROLES.payTo.address);
    const buyerBefore = await balance(wallet.address);
    const answer = await waitFor(
      'a stream sold',
      async () => {
        const a = await buy(api, wallet, { ...SMALL_STREAM, metadata: { quote_id: quote.id } });
        return a.status === 200 ? a : a.body?.error?.code === 'capacity_exhausted' ? undefined : a;
      },
      20_000,
    );
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    bought = answer.body;
    const price = BigInt(bought.order.amount.amount_atomic);
    assert.equal(price, BigInt(quote.price.amount_atomic), 'the order paid the quoted price');
    assert.equal((await balance(ROLES.payTo.address)) - sellerBefore, price, 'the seller received the price');
    assert.equal(buyerBefore - (await balance(wallet.address)), price, 'the buyer paid it once');
    assert.equal(new URL(bought.service.stream_url).port, String(listenPort), 'listeners go to ICECAST_LISTEN');

    const source = startFfmpegSource(bought.service.broadcast_url);
    cleanups.push(async () => source.kill('SIGKILL'));
    const listener = await waitFor(
      'a listener hears the stream',
      async () => {
        const l = await connectListener(bought.service.stream_url).catch(() => undefined);
        if (l?.status === 200) return l;
        l?.close();
        return undefined;
      },
      20_000,
    );
    await waitFor('audio bytes', async () => listener.received().length > 4000 || undefined, 10_000);
    listener.close();
  });

  test('an extension is paid and moves the expiry on the events stream; webhooks are refused a private address', async () => {
    const id = bought.service.service_id;
    const events = await openSse(`${api.baseUrl}/services/${id}/events`, { authorization: `Bearer ${api.apiKey}` });
    // Production delivers only to public addresses, which this machine has none of: a loopback receiver is refused.
    const hook = await request(api, 'POST', '/webhooks', { body: { url: 'https://127.0.0.1:9/audio' } });
    assert.equal(hook.status, 422, JSON.stringify(hook.body));
    assert.equal(hook.body.error.code, 'webhook_url_not_allowed');

    const sellerBefore = await balance(ROLES.payTo.address);
    const extended = await payFor(api, wallet, `/services/${id}/extend`, { duration_hours: 1 });
    assert.equal(extended.status, 200, JSON.stringify(extended.body));
    const paid = BigInt(extended.body.order.amount.amount_atomic);
    assert.equal((await balance(ROLES.payTo.address)) - sellerBefore, paid);
    const hours = (Date.parse(extended.body.service.expires_at) - Date.parse(bought.service.expires_at)) / 3_600_000;
    assert.equal(hours, 1, 'one hour more');
    await waitFor(
      'service.extended on the events stream',
      async () => events.messages.some((m) => m.event === 'service.extended') || undefined,
      10_000,
    );
    events.close();
  });

  test('a stop cuts the stream and refunds the unused hours on chain, from the refund wallet to the payer', async () => {
    const id = bought.service.service_id;
    const buyerBefore = await balance(wallet.address);
    const walletBefore = await balance(ROLES.refunds.address);
    const stopped = await request(api, 'POST', `/services/${id}/stop`);
    let last: any;
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    const usage = await waitFor(
      'the refund sent on chain',
      async () => {
        const u = (await request(api, 'GET', `/services/${id}/usage`)).body.usage;
        last = u;
        return u?.refund?.status === 'sent' ? u : undefined;
      },
      30_000,
    ).catch((e) => {
      throw new Error(`${e.message}: ${JSON.stringify(last?.refund)}\n${api.output().slice(-3000)}`);
    });
    const amount = BigInt(usage.refund.amount.amount_atomic);
    assert.ok(amount > 0n, 'the unused hours come back');
    assert.equal((await balance(wallet.address)) - buyerBefore, amount, 'the payer received the refund');
    assert.equal(walletBefore - (await balance(ROLES.refunds.address)), amount, 'paid from the refund wallet');
  });

  test('an AutoDJ service takes an upload through the API and the host plays it', async () => {
    const autodj = await buy(api, wallet, {
      product_id: 'temporary-autodj',
      email: 'dj@example.com',
      station_name: 'Production AutoDJ',
      parameters: { duration_hours: 1, bitrate_kbps: 64, storage_mb: 5, listeners: 3 },
    });
    assert.equal(autodj.status, 200, JSON.stringify(autodj.body));
    const id = autodj.body.service.service_id;
    const mp3 = await tone(3, 'Production Tone', ['-c:a', 'libmp3lame', '-f', 'mp3']);
    const put = await request(api, 'PUT', `/services/${id}/files/tone.mp3`, {
      rawBody: mp3,
      headers: { 'content-type': 'application/octet-stream' },
    });
    assert.equal(put.status, 201, JSON.stringify(put.body));
    const listener = await waitFor(
      'the AutoDJ on air',
      async () => {
        const l = await connectListener(autodj.body.service.stream_url).catch(() => undefined);
        if (l?.status === 200) return l;
        l?.close();
        return undefined;
      },
      30_000,
    );
    await waitFor('AutoDJ audio', async () => listener.received().length > 4000 || undefined, 15_000);
    listener.close();
  });

  test("an order failed on a facilitator's word (as earlier versions did) whose transfer landed is refunded in full", async () => {
    const slow = await startFacilitator(chain.rpcUrl, { fault: 'pending-200:3000' });
    cleanups.push(() => slow.stop());
    switchTo(slow.url);
    const buyerBefore = await balance(wallet.address);
    const sent: string[] = [];
    const first = await buy(api, wallet, SMALL_STREAM, randomUUID(), sent);
    assert.equal(first.status, 503, JSON.stringify(first.body));
    const orderId = first.body.error.details[0].order_id;
    // What an earlier version did with a settlement_pending answer: the order failed, "nothing was charged". The
    // refund worker is made to believe it looked on chain already: audit verify asks the token itself.
    const db = new Database(postgres.url);
    cleanups.push(() => db.close());
    const failed = await db.query(
      "UPDATE orders SET state = 'failed', failure = 'settlement_pending: taken at its word', chain_checked_at = now() WHERE id = $1 AND state = 'settling' RETURNING id",
      [orderId],
    );
    assert.equal(failed.length, 1, 'the order was still settling');
    const { from, nonce } = authorizationOf(sent[0]);
    await waitFor(
      'the transfer landed',
      async () => (await chain.chain.authorizationState(from, nonce)) || undefined,
      30_000,
    );
    const limbo = await api.cli(['audit', 'verify']);
    assert.equal(limbo.code, 1, limbo.stdout);
    assert.match(
      limbo.stderr,
      new RegExp(
        `order ${orderId}: failed \\("nothing was charged"\\), but its payment authorization moved \\d+ atomic units to 0x[0-9a-fA-F]{40} in transaction 0x[0-9a-f]{64}: charged on chain, neither delivered nor refunded`,
      ),
    );
    await db.query('UPDATE orders SET chain_checked_at = NULL WHERE id = $1', [orderId]);
    const refunded = await orderWhen(api, orderId, (s) => s === 'refunded', 30_000);
    assert.equal(refunded.state, 'refunded', JSON.stringify(refunded.body));
    assert.match(refunded.body.order.failure, /went through on chain all the same/);
    const price = BigInt(refunded.body.order.amount.amount_atomic);
    await waitFor(
      'the full refund on chain',
      async () => (await balance(wallet.address)) === buyerBefore || undefined,
      30_000,
    );
    assert.equal(await balance(wallet.address), buyerBefore, `charged ${price}, refunded ${price}`);
    const verify = await api.cli(['audit', 'verify']);
    assert.equal(verify.code, 0, verify.stderr);
  });

  test('an API killed while a settlement is pending: another instance finishes the order, charged once', async () => {
    const slow = await startFacilitator(chain.rpcUrl, { fault: 'pending-200:2500' });
    cleanups.push(() => slow.stop());
    switchTo(slow.url);
    const key = randomUUID();
    const sent: string[] = [];
    const buyerBefore = await balance(wallet.address);
    const first = await buy(api, wallet, SMALL_STREAM, key, sent);
    assert.equal(first.status, 503, JSON.stringify(first.body));
    assert.equal(first.body.error.code, 'settlement_pending');
    const orderId = first.body.error.details[0].order_id;
    assert.match(first.body.error.message, new RegExp(orderId));
    await api.stop('SIGKILL');

    const dataDir = await scratchDir('audio-prod-api2-');
    const media = api.env.MEDIA_DIR;
    const second = await startProduction(
      chain,
      api.env.X402_FACILITATOR_URL,
      { ...shared(media), DATA_DIR: dataDir },
      undefined,
      ['--role', 'api'],
    );
    cleanups.push(() => second.stop());
    second.apiKey = api.apiKey;
    const done = await orderWhen(second, orderId, (s) => s === 'active' || s === 'failed', 30_000);
    assert.equal(done.state, 'active', JSON.stringify(done.body));
    const again = await request(second, 'POST', '/orders', {
      body: SMALL_STREAM,
      headers: { 'idempotency-key': key, 'payment-signature': sent.at(-1)! },
    });
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.equal(again.body.order.id, orderId);
    assert.equal(sent.length, 1, 'one payment signed');
    assert.equal(
      buyerBefore - (await balance(wallet.address)),
      BigInt(again.body.order.amount.amount_atomic),
      'charged once',
    );
    const verify = await second.cli(['audit', 'verify']);
    assert.equal(verify.code, 0, verify.stderr);
  });
});
