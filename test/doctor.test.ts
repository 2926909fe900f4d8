import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startAnvil, type AnvilProcess } from '../src/chain/anvil.js';
import { USDC_NETWORKS } from '../src/chain/networks.js';
import { loadArtifacts } from '../src/chain/contracts.js';
import { DataDirLock } from '../src/cli/data-dir-lock.js';
import { Database, freePort } from '../src/store/index.js';
import { doctorCommand } from './support/doctor-command.js';
import { ROLES, startChain, startFacilitator, startProduction, type Chain } from './support/production.js';
import {
  cli,
  copyCatalog,
  request,
  scratchDir,
  startService,
  type CliResult,
  type Service,
} from './support/service.js';

/**
 * `agent-audio doctor` against a production deployment made of real processes: anvil (chain id 8453, our USDC at the
 * Base address), a facilitator process, serve in production mode with its PostgreSQL; and a second anvil that runs as
 * Base Sepolia (chain id 84532) with the same token code at Base Sepolia's USDC address, whose EIP-712 name is "USD
 * Coin" where Base Sepolia's is "USDC". Each check is made to pass and to fail by changing one setting of the
 * deployment's environment for one doctor run.
 */

let chain: Chain;
let sepolia: AnvilProcess;
let facilitator: Awaited<ReturnType<typeof startFacilitator>>;
let service: Service;
let databaseUrl: string;
let db: Database;
const secretsKey = Buffer.alloc(32, 7).toString('base64');

async function rpc(url: string, method: string, params: unknown[]): Promise<unknown> {
  const answer = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return ((await answer.json()) as { result: unknown }).result;
}

/** An anvil with another chain id and our token's code at that network's USDC address (its name stays "USD Coin"). */
async function startChainAs(network: (typeof USDC_NETWORKS)['base-sepolia']): Promise<AnvilProcess> {
  const anvil = await startAnvil({ host: '127.0.0.1', port: 0, chainId: network.chainId });
  await rpc(anvil.rpcUrl, 'anvil_setCode', [network.usdc, loadArtifacts().contracts.FiatTokenV2.deployedBytecode]);
  return anvil;
}

before(async () => {
  [chain, sepolia] = await Promise.all([startChain(), startChainAs(USDC_NETWORKS['base-sepolia'])]);
  facilitator = await startFacilitator(chain.rpcUrl);
  const port = await freePort();
  service = await startProduction(chain, facilitator.url, {
    PORT: String(port),
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
    WEBHOOK_SECRETS_KEY: secretsKey,
  });
  databaseUrl = (await DataDirLock.holder(service.dataDir))!.database_url!;
  db = new Database(databaseUrl, { max: 2 });
});

after(async () => {
  await db?.close();
  await service?.stop();
  await facilitator?.stop();
  await Promise.all([chain?.stop(), sepolia?.stop()]);
});

interface Report {
  run: CliResult;
  status: string;
  checks: Array<{ check: string; status: string; message: string; fix?: string; refuse?: boolean }>;
}

/**
 * doctor --json with the deployment's environment, changed by `env`: in this process (support/doctor-command.ts)
 * unless `real`, a CLI process as an operator runs it (the healthy deployment's run, text and --json, covers that).
 */
async function doctor(env: Record<string, string> = {}, real = false): Promise<Report> {
  const run = await (real ? cli : doctorCommand)(['doctor', '--json'], { ...service.env, ...env });
  let parsed: Omit<Report, 'run'>;
  try {
    parsed = JSON.parse(run.stdout);
  } catch {
    throw new Error(`doctor printed no JSON (exit ${run.code}):\n${run.stdout}\n${run.stderr}`);
  }
  return { run, ...parsed };
}

function check(report: Report, name: string) {
  const found = report.checks.filter((c) => c.check === name);
  assert.ok(found.length, `no ${name} check in ${JSON.stringify(report.checks)}`);
  return found[0];
}

/** The only checks not ok are these, with these statuses. */
function notOk(report: Report): Record<string, string> {
  return Object.fromEntries(report.checks.filter((c) => c.status !== 'ok').map((c) => [c.check, c.status]));
}

test('a healthy production deployment: every check ok, exit 0, and the readable report says so', async () => {
  const report = await doctor({}, true);
  assert.deepEqual(notOk(report), {}, JSON.stringify(report.checks, null, 2));
  assert.equal(report.run.code, 0);
  assert.equal(report.status, 'ok');
  assert.deepEqual(
    report.checks.map((c) => c.check),
    [
      'environment',
      'facilitator',
      'payTo',
      'chain id',
      'asset',
      'refund wallet',
      'public URL',
      'postgres',
      'migrations',
      'streaming hosts',
      'streaming proxy',
      'catalog',
      'webhook secrets',
    ],
  );
  assert.match(check(report, 'streaming proxy').message, /^HAProxy holds the public streaming port/);
  assert.match(check(report, 'asset').message, /answers name "USD Coin" version "2"/);
  assert.match(
    check(report, 'refund wallet').message,
    /holds .* ETH \(gas for about \d+ refunds\) and 100 USDC \(100 typical/,
  );
  assert.match(check(report, 'postgres').message, /^PostgreSQL (1[5-9]|[2-9]\d)\./);
  const text = await cli(['doctor'], service.env);
  // The report as an operator reads it (docs/deployment.md shows one).
  console.log(text.stdout);
  assert.equal(text.code, 0);
  assert.match(text.stdout, /^ok {4}environment/m);
  assert.match(text.stdout, /\n\nall ok\n$/);
});

test('warnings only exit 3: no webhook secrets key, no PUBLIC_BASE_URL, no refund wallet, development mode', async () => {
  const report = await doctor({
    WEBHOOK_SECRETS_KEY: '',
    PUBLIC_BASE_URL: '',
    X402_REFUND_KEY_FILE: '',
    AUDIO_API_ENV: 'development',
  });
  assert.deepEqual(notOk(report), {
    environment: 'warn',
    'webhook secrets': 'warn',
    'public URL': 'warn',
    'refund wallet': 'warn',
  });
  assert.equal(report.run.code, 3);
  assert.equal(report.status, 'warn');
  assert.match(check(report, 'webhook secrets').fix!, /openssl rand -base64 32/);
  assert.match(check(report, 'refund wallet').fix!, /X402_REFUND_KEY_FILE/);
});

test('streaming proxy: the front door warns; no haproxy beside icecast2 fails and says what to do', async () => {
  const frontDoor = await doctor({ ICECAST_PROXY: 'front-door' });
  assert.deepEqual(notOk(frontDoor), { 'streaming proxy': 'warn' });
  assert.match(check(frontDoor, 'streaming proxy').fix!, /install haproxy \(npm run setup\)/);
  // /usr/bin has node and icecast2; Debian puts haproxy in /usr/sbin.
  const path = '/usr/bin:/bin';
  const layout = spawnSync('sh', ['-c', 'command -v icecast2 && ! command -v haproxy'], { env: { PATH: path } });
  if (layout.status !== 0) return;
  const missing = await doctor({ PATH: path }, true);
  assert.deepEqual(notOk(missing), { 'streaming proxy': 'fail' });
  assert.equal(missing.run.code, 1);
  assert.match(check(missing, 'streaming proxy').fix!, /npm run setup .*or set ICECAST_PROXY=front-door/);
});

test('the facilitator: unreachable, or not listing exact on our network', async () => {
  const [down, elsewhere] = await Promise.all([
    doctor({ X402_FACILITATOR_URL: 'http://127.0.0.1:1' }),
    // The facilitator settles on 8453; asked for Base Sepolia (on a Base Sepolia chain) it lists nothing for it.
    doctor({ X402_NETWORK: 'base-sepolia', X402_RPC_URL: sepolia.rpcUrl }),
  ]);
  assert.equal(check(down, 'facilitator').status, 'fail');
  assert.match(check(down, 'facilitator').message, /http:\/\/127\.0\.0\.1:1\/supported did not answer/);
  assert.equal(down.run.code, 1);
  assert.equal(check(elsewhere, 'facilitator').status, 'fail');
  assert.match(
    check(elsewhere, 'facilitator').message,
    /does not list exact on eip155:84532 \(x402 v2\); it lists exact on eip155:8453$/,
  );
});

test("the RPC's chain id must be the network's: 84532 for base is refused", async () => {
  const report = await doctor({ X402_RPC_URL: sepolia.rpcUrl });
  const chainId = check(report, 'chain id');
  assert.equal(chainId.status, 'fail');
  assert.equal(chainId.refuse, true);
  assert.match(chainId.message, /X402_RPC_URL is chain id 84532, but X402_NETWORK eip155:8453 is chain id 8453/);
  assert.equal(check(report, 'asset').status, 'warn', 'the asset is not read on another chain');
  assert.match(check(report, 'refund wallet').message, /balances not read, see the chain id check/);
  assert.equal(report.run.code, 1);
  const unreachable = await doctor({ X402_RPC_URL: 'http://127.0.0.1:1' });
  assert.equal(check(unreachable, 'chain id').status, 'fail');
  assert.equal(check(unreachable, 'chain id').refuse, undefined, 'an RPC down is not a wrong chain');
});

test("the asset's EIP-712 domain must be the one the 402 advertises, and a contract must be there", async () => {
  const [mismatch, empty] = await Promise.all([
    // Base Sepolia's USDC is "USDC" version 2; the token there answers "USD Coin".
    doctor({ X402_NETWORK: 'base-sepolia', X402_RPC_URL: sepolia.rpcUrl }),
    doctor({ X402_ASSET: '0x1111111111111111111111111111111111111111' }),
  ]);
  assert.equal(check(mismatch, 'chain id').status, 'ok', 'base-sepolia is chain id 84532');
  const asset = check(mismatch, 'asset');
  assert.equal(asset.status, 'fail');
  assert.equal(asset.refuse, true);
  assert.match(
    asset.message,
    /the token at 0x036CbD53842c5426634e7929541eC2318f3dCF7e answers name "USD Coin" version "2", but the 402 advertises "USDC" version "2" for eip155:84532/,
  );
  assert.equal(check(empty, 'asset').status, 'fail');
  assert.match(check(empty, 'asset').message, /there is no contract at X402_ASSET 0x1111/);
});

test('payTo: not the refund wallet; an invalid or zero address stops the command with one sentence', async () => {
  const report = await doctor({ X402_PAY_TO: ROLES.refunds.address });
  assert.equal(check(report, 'payTo').status, 'fail');
  assert.equal(check(report, 'payTo').refuse, true);
  assert.match(check(report, 'payTo').message, /is the refund wallet/);
  const [zero, garbage] = await Promise.all([
    cli(['doctor'], { ...service.env, X402_PAY_TO: `0x${'0'.repeat(40)}` }),
    cli(['doctor'], { ...service.env, X402_PAY_TO: 'not-an-address' }),
  ]);
  assert.equal(zero.code, 1);
  assert.match(
    zero.stderr,
    /^error: X402_PAY_TO must be the address of the wallet that receives payments, not the zero/,
  );
  assert.equal(garbage.code, 1);
  assert.match(garbage.stderr, /^error: X402_PAY_TO must be the 0x address .* got "not-an-address"\n$/);
});

test('the refund wallet: none of its own funds fails, a few refunds warns', async () => {
  const dir = await scratchDir('audio-doctor-keys-');
  const [dry, few] = [generatePrivateKey(), generatePrivateKey()];
  await writeFile(join(dir, 'dry.key'), dry);
  await writeFile(join(dir, 'few.key'), few);
  const fewAddress = privateKeyToAccount(few).address;
  await rpc(chain.rpcUrl, 'anvil_setBalance', [fewAddress, '0xde0b6b3a7640000']);
  await chain.chain.ensureFunded(fewAddress, 5_000_000n);
  const [dryReport, fewReport] = await Promise.all([
    doctor({ X402_REFUND_KEY_FILE: join(dir, 'dry.key') }),
    doctor({ X402_REFUND_KEY_FILE: join(dir, 'few.key') }),
  ]);
  assert.equal(check(dryReport, 'refund wallet').status, 'fail');
  assert.match(check(dryReport, 'refund wallet').message, /holds 0 ETH .* and 0 USDC .*: not one refund can be sent/);
  assert.match(check(dryReport, 'refund wallet').fix!, /send ETH \(gas\) and USDC to 0x/);
  assert.equal(check(fewReport, 'refund wallet').status, 'warn');
  assert.match(check(fewReport, 'refund wallet').message, /5 USDC \(5 typical refunds of 1 USDC/);
});

test('PUBLIC_BASE_URL must reach this API: not nothing, not another server, not another catalog', async () => {
  const shipped = await copyCatalog();
  // CLI processes, side by side: run one after the other in the test process, the last one's check of the API's
  // health now and then ran out of its 5 s.
  const [down, elsewhere, otherCatalog] = await Promise.all([
    doctor({ PUBLIC_BASE_URL: 'http://127.0.0.1:1' }, true),
    doctor({ PUBLIC_BASE_URL: facilitator.url }, true),
    // This doctor reads the shipped catalog; the API at PUBLIC_BASE_URL serves the test's roomier copy.
    doctor({ CATALOG_DIR: shipped.catalogDir, RULES_DIR: shipped.rulesDir }, true),
  ]);
  assert.deepEqual(notOk(down), { 'public URL': 'fail' });
  assert.match(check(down, 'public URL').message, /http:\/\/127\.0\.0\.1:1\/api\/v1\/health did not answer/);
  assert.equal(check(elsewhere, 'public URL').status, 'fail');
  assert.match(check(elsewhere, 'public URL').message, /\/api\/v1\/health did not answer: HTTP 404/);
  assert.deepEqual(notOk(otherCatalog), { 'public URL': 'warn' });
  assert.match(check(otherCatalog, 'public URL').message, /answers with another catalog \(\S+, here \S+\)/);
});

test('PostgreSQL unreachable; a database without migrations; hosts: none live, and one live beside a stale one', async () => {
  const bare = new URL(databaseUrl);
  bare.pathname = `/doctor_bare_${process.pid}`;
  await db.query(`CREATE DATABASE doctor_bare_${process.pid}`);
  const [down, unmigrated] = await Promise.all([
    doctor({ DATABASE_URL: 'postgres://audio:hunter2pw@127.0.0.1:1/audio' }),
    doctor({ DATABASE_URL: bare.href }),
  ]);
  assert.equal(check(down, 'postgres').status, 'fail');
  assert.match(
    check(down, 'postgres').message,
    /the PostgreSQL of DATABASE_URL \(127\.0\.0\.1:1\/audio\) could not be used: no connection could be made/,
  );
  assert.doesNotMatch(down.run.stdout, /hunter2pw|Idempotency-Key/);
  assert.equal(check(unmigrated, 'postgres').status, 'ok');
  assert.equal(check(unmigrated, 'migrations').status, 'warn');
  assert.match(check(unmigrated, 'migrations').message, /^(\d+) of \1 migrations not applied yet \(from 001_/);
  assert.match(check(unmigrated, 'migrations').fix!, /serve applies them at its start/);
  assert.equal(check(unmigrated, 'streaming hosts').status, 'warn');

  // A host that stopped beating an hour ago beside the live one; then the live one drained: none takes services.
  await db.query(`INSERT INTO streaming_hosts (id, public_url, state, heartbeat_at)
                  VALUES ('gone-host', 'http://gone.example:8000', 'up', now() - interval '1 hour')`);
  try {
    const oneStale = await doctor();
    assert.equal(check(oneStale, 'streaming hosts').status, 'warn');
    assert.match(
      check(oneStale, 'streaming hosts').message,
      /^1 up and beating \(host_\w+ \d+(\.\d)? s ago\); gone-host (up|down), heartbeat 36\d\d(\.\d)? s$/,
    );
    await db.query("UPDATE streaming_hosts SET state = 'draining' WHERE id <> 'gone-host'");
    const noneLive = await doctor();
    assert.equal(check(noneLive, 'streaming hosts').status, 'fail');
    assert.match(check(noneLive, 'streaming hosts').message, /^none of 2 hosts is up with a fresh heartbeat/);
    assert.match(check(noneLive, 'streaming hosts').fix!, /undrain/);
  } finally {
    await db.query("DELETE FROM streaming_hosts WHERE id = 'gone-host'");
    await db.query("UPDATE streaming_hosts SET state = 'up' WHERE state = 'draining'");
  }
});

test('the catalog checks of catalog check, and a webhook secrets key that is not 32 bytes', async () => {
  const broken = await copyCatalog();
  await writeFile(join(broken.catalogDir, 'catalog.yaml'), 'catalog_version: [\n');
  const report = await doctor({
    CATALOG_DIR: broken.catalogDir,
    RULES_DIR: broken.rulesDir,
    WEBHOOK_SECRETS_KEY: 'c2hvcnQ=',
  });
  assert.equal(check(report, 'catalog').status, 'fail');
  assert.match(check(report, 'catalog').message, /catalog\.yaml:\d+:\d+/);
  assert.match(check(report, 'catalog').fix!, /catalog check/);
  assert.equal(check(report, 'webhook secrets').status, 'fail');
  assert.match(check(report, 'webhook secrets').message, /must be 32 random bytes in base64.* got 5 bytes/);
});

test('serve in production refuses to start on what would lose money, and says what to do', async () => {
  const dataDir = await scratchDir('audio-doctor-refused-');
  const env = { ...service.env, DATA_DIR: dataDir, PORT: '0', METRICS_PORT: '0' };
  const [wrongChain, wrongDomain, payToIsRefunds] = await Promise.all([
    cli(['serve'], { ...env, X402_RPC_URL: sepolia.rpcUrl }, 30_000),
    cli(['serve'], { ...env, X402_RPC_URL: sepolia.rpcUrl, X402_NETWORK: 'base-sepolia' }, 30_000),
    cli(['serve'], { ...env, X402_PAY_TO: ROLES.refunds.address }, 30_000),
  ]);
  for (const run of [wrongChain, wrongDomain, payToIsRefunds]) {
    assert.equal(run.code, 1, run.stderr);
    assert.doesNotMatch(run.stdout, /serving on/);
  }
  assert.match(
    wrongChain.stderr,
    /serve refuses to start, a sale would lose money: X402_RPC_URL is chain id 84532.*To fix: point X402_RPC_URL at a node of eip155:8453/,
  );
  assert.match(wrongDomain.stderr, /answers name "USD Coin" version "2", but the 402 advertises "USDC" version "2"/);
  assert.match(payToIsRefunds.stderr, /X402_PAY_TO 0x[0-9a-fA-F]{40} is the refund wallet/);
});

test('production without X402_RPC_URL, X402_FACILITATOR_URL and X402_PAY_TO starts, quotes, and is not healthy', async () => {
  const bare = await startService(
    { AUDIO_API_ENV: 'production', X402_PAY_TO: '', X402_FACILITATOR_URL: '', X402_RPC_URL: '' },
    { args: ['--role', 'api'] },
  );
  try {
    const health = await request(bare, 'GET', '/health', { auth: false });
    assert.equal(health.status, 200);
    assert.equal(health.body.status, 'degraded');
    assert.equal(health.body.checks.payments.ok, false);
    assert.equal(health.body.machine_payment.configured, false);
    const details = await fetch(bare.metricsUrl.replace(/\/metrics$/, '/health/details'));
    const body = (await details.json()) as { checks: { payments: { error: string } } };
    assert.match(body.checks.payments.error, /set X402_PAY_TO, X402_FACILITATOR_URL, X402_RPC_URL/);
  } finally {
    await bare.stop();
  }
});
