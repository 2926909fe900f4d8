// `npm run demo:agent`: an autonomous agent (scripts/agent.ts) with only a base URL and a funded wallet, end to end.
// Without BASE_URL it starts its own service on embedded defaults in a scratch directory, lets webhooks reach this
// machine over http (development only) and announces service.expiring an hour ahead, so the whole life shows at once;
// its funded wallet is that service's development buyer. With BASE_URL and WALLET_PRIVATE_KEY it talks to that service.
// It buys a 10-hour stream, extends it by 2 hours (paid, the new expiry shown) and, at the end, stops it and shows
// the refund of the unused share of both payments, proven on chain.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startService, type Service } from '../test/support/service.js';
import { runAgent } from './agent.js';

const durationHours = 10;
const extendHours = 2;
let service: Service | undefined;
let baseUrl = process.env.BASE_URL;
let privateKey = process.env.WALLET_PRIVATE_KEY as `0x${string}` | undefined;
if (!baseUrl || !privateKey) {
  console.log('starting a scratch service (embedded PostgreSQL, chain and Icecast)…');
  service = await startService({
    WEBHOOK_ALLOW_INSECURE_LOOPBACK: '1',
    REFUND_INTERVAL_MS: '500',
    EVENTS_EXPIRING_LEAD_SECONDS: String((durationHours + extendHours) * 3600 + 60),
  });
  baseUrl = service.baseUrl;
  privateKey = JSON.parse(await readFile(join(service.dataDir, 'dev.json'), 'utf8')).buyer.private_key;
}
try {
  await runAgent({
    baseUrl,
    privateKey: privateKey!,
    awaitEvents: (process.env.AGENT_AWAIT_EVENTS ?? 'service.active,service.expiring').split(','),
    timeoutMs: Number(process.env.AGENT_TIMEOUT_MS ?? 120_000),
    report: (step, fields) => console.log(`${step.padEnd(24)} ${JSON.stringify(fields)}`),
    durationHours,
    extendHours,
    stopAtEnd: true,
  });
} catch (e) {
  console.error(`agent failed: ${(e as Error).message}`);
  process.exitCode = 1;
} finally {
  await service?.stop();
}
