// Paid orders placed on a pool of 1, then 3 streaming hosts behind one API instance (part of npm run bench:scale-out).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { request, roomyCatalog, startService, type Service } from '../test/support/service.js';
import { TestWallet } from '../test/support/wallet.js';
import { HostPlacement } from '../src/hosts/index.js';
import { Database } from '../src/store/index.js';
import { percentile } from './percentile.js';
import { pool } from './pool.js';

const ORDERS = Number(process.env.POOL_ORDERS ?? 30);
const BUYERS = 6;
const body = (i: number) => ({
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: `Pool ${i}`,
  parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
});

/** ORDERS paid orders by BUYERS at once: orders/s, the 402 (placement checked before payment) and the paid request. */
async function placeOrders(api: Service, wallet: TestWallet, round: string) {
  const offers: number[] = [];
  const paid: number[] = [];
  const started = performance.now();
  await pool(
    Array.from({ length: ORDERS }, (_, i) => i),
    BUYERS,
    async (i) => {
      const key = `${round}-${i}`;
      let at = performance.now();
      const offer = await request(api, 'POST', '/orders', { body: body(i), headers: { 'idempotency-key': key } });
      offers.push(performance.now() - at);
      if (offer.status !== 402) throw new Error(`order ${i}: ${offer.status} ${JSON.stringify(offer.body)}`);
      const signature = await wallet.pay(offer.headers.get('payment-required')!);
      at = performance.now();
      const done = await request(api, 'POST', '/orders', {
        body: body(i),
        headers: { 'idempotency-key': key, 'payment-signature': signature },
      });
      paid.push(performance.now() - at);
      if (done.status !== 200) throw new Error(`order ${i}: ${done.status} ${JSON.stringify(done.body)}`);
    },
  );
  const seconds = (performance.now() - started) / 1000;
  offers.sort((a, b) => a - b);
  paid.sort((a, b) => a - b);
  return { perSecond: ORDERS / seconds, offers, paid };
}

/** What placement reads of the pool (the count an order is checked against), timed alone on this PostgreSQL. */
async function placementReads(databaseUrl: string) {
  const db = new Database(databaseUrl, { max: 2 });
  try {
    const placement = new HostPlacement(db, {
      downAfterSeconds: 30,
      fallbackLimits: { sources: 100, listeners: 5000 },
      inFlight: { sql: 'SELECT NULL WHERE false', byHost: () => new Map() },
    });
    const times: number[] = [];
    for (let i = 0; i < 300; i++) {
      const at = performance.now();
      await placement.pool();
      times.push(performance.now() - at);
    }
    times.sort((a, b) => a - b);
    return { n: times.length, p50: percentile(times, 0.5), p99: percentile(times, 0.99) };
  } finally {
    await db.close();
  }
}

export async function benchPool(): Promise<void> {
  const services: Service[] = [];
  try {
    const catalog = await roomyCatalog();
    const api = await startService(
      { ...catalog, RATE_LIMIT_PER_IP: '0', RATE_LIMIT_PER_KEY: '0' },
      { args: ['--role', 'api'] },
    );
    services.push(api);
    const lock = JSON.parse(await readFile(join(api.dataDir, 'serve.lock'), 'utf8'));
    const dev = JSON.parse(await readFile(join(api.dataDir, 'dev.json'), 'utf8'));
    const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
    const host = (id: string) =>
      startService(
        { ...catalog, DATABASE_URL: lock.database_url, CHAIN_RPC_URL: dev.chain.rpc_url, STREAMING_HOST_ID: id },
        { args: ['--role', 'host'] },
      );
    services.push(await host('bench-a'));
    const rows: string[] = [];
    for (const [hosts, round] of [
      [1, 'one'],
      [3, 'three'],
    ] as const) {
      if (hosts === 3) services.push(...(await Promise.all([host('bench-b'), host('bench-c')])));
      const r = await placeOrders(api, wallet, `${round}-${process.pid}`);
      const ms = (v: number) => v.toFixed(1);
      rows.push(
        `| ${hosts} | ${ORDERS} | ${r.perSecond.toFixed(1)} | ${ms(percentile(r.offers, 0.5))} / ${ms(percentile(r.offers, 0.99))} | ${ms(percentile(r.paid, 0.5))} / ${ms(percentile(r.paid, 0.99))} |`,
      );
    }
    const reads = await placementReads(lock.database_url);
    console.log(
      `\n| hosts | paid orders (${BUYERS} buyers at once) | orders/s | 402 with placement check p50 / p99 ms | paid request (claim with placement, settle, provision) p50 / p99 ms |\n|--:|--:|--:|--:|--:|`,
    );
    for (const row of rows) console.log(row);
    console.log(
      `\nreading the pool for a placement (3 live hosts, ${2 * ORDERS} services, no orders in flight): p50 ${reads.p50.toFixed(2)} ms, p99 ${reads.p99.toFixed(2)} ms over ${reads.n} reads`,
    );
  } finally {
    for (const s of services.reverse()) await s.stop();
  }
}
