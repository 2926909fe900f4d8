// Quotes per second from 1 instance, then from 3 instances on one PostgreSQL, on this machine (npm run bench:scale-out);
// then paid orders placed on a pool of 1 and 3 streaming hosts (bench/host-pool.ts; POOL=only skips the quotes).
import autocannon from 'autocannon';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startService, type Service } from '../test/support/service.js';
import { benchPool } from './host-pool.js';

const seconds = Number(process.env.SECONDS ?? 8);
const body = JSON.stringify({
  product_id: 'instant-stream',
  parameters: { duration_hours: 3, max_listeners: 5, bitrate_kbps: 64 },
});
const unlimited = { RATE_LIMIT_PER_IP: '0', RATE_LIMIT_PER_KEY: '0' };

function load(service: Service, apiKey: string, connections: number): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url: `${service.baseUrl}/quotes`,
        method: 'POST',
        connections,
        duration: seconds,
        body,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
      },
      (err, result) => (err ? reject(err) : resolve(result)),
    );
  });
}

async function benchQuotes(): Promise<void> {
  const services: Service[] = [];
  try {
    const first = await startService(unlimited);
    services.push(first);
    const lock = JSON.parse(await readFile(join(first.dataDir, 'serve.lock'), 'utf8'));
    const dev = JSON.parse(await readFile(join(first.dataDir, 'dev.json'), 'utf8'));
    for (const account of ['4', '7']) {
      services.push(
        await startService({
          ...unlimited,
          DATABASE_URL: lock.database_url,
          CHAIN_RPC_URL: dev.chain.rpc_url,
          DEV_FACILITATOR_ACCOUNT: account,
        }),
      );
    }
    await load(first, first.apiKey, 8);
    const one = await load(first, first.apiKey, 32);
    const three = await Promise.all(services.map((s) => load(s, first.apiKey, 11)));
    const sum = three.reduce((n, r) => n + r.requests.average, 0);
    const non2xx = one.non2xx + three.reduce((n, r) => n + r.non2xx, 0);
    console.log(`| instances | connections | quotes/s | p99 ms | vs 1 instance |\n|--:|--:|--:|--:|--:|`);
    console.log(`| 1 | 32 | ${Math.round(one.requests.average)} | ${one.latency.p99} | 1.00× |`);
    console.log(
      `| 3 | 3 × 11 | ${Math.round(sum)} | ${Math.max(...three.map((r) => r.latency.p99))} | ${(sum / one.requests.average).toFixed(2)}× |`,
    );
    console.log(`non-2xx answers: ${non2xx}`);
  } finally {
    for (const s of services.reverse()) await s.stop();
  }
}

if (process.env.POOL !== 'only') await benchQuotes();
await benchPool();
