import { readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { createPublicClient, formatEther, http, isAddressEqual, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { assetDomain } from '../chain/networks.js';
import { tokenAbi } from '../chain/token.js';
import { formatDiagnostic } from '../catalog/index.js';
import { loadSecretBox } from '../events/index.js';
import { installed } from '../provisioning/index.js';
import { hostPoolReport } from '../hosts/index.js';
import type { Logger } from '../log/index.js';
import { facilitatorJwt, readFacilitatorAuthKey, type FacilitatorAuthKey } from '../payments/facilitator-auth.js';
import { openSnapshot, readSnapshotFiles } from '../pricing/index.js';
import type { Database } from '../store/index.js';
import type { Config } from './config.js';
import { streamingProxy } from './streaming-proxy.js';

/**
 * What an operator checks before a single sale (`agent-audio doctor`), and serve at its start in production: each
 * check says ok, warn or fail, what it found and what to do. A failure marked `refuse` would lose money (payments to
 * an address nobody holds, on another chain, signed for a domain the token does not answer): serve does not start.
 */

export type CheckStatus = 'ok' | 'warn' | 'fail';

export interface CheckResult {
  check: string;
  status: CheckStatus;
  /** What was found. */
  message: string;
  /** What to do (warn and fail). */
  fix?: string;
  /** serve refuses to start on this failure. */
  refuse?: boolean;
}

/** How long one network check (facilitator, RPC call, PUBLIC_BASE_URL) may take. */
const NETWORK_TIMEOUT_MS = 5000;
/** Gas one refund (a USDC transferWithAuthorization) is counted at, with margin, as the refund wallet counts it. */
const REFUND_GAS = 120_000n;
/** Fewer typical refunds than this in the refund wallet (gas or USDC) is a warning. */
const FEW_REFUNDS = 10n;
/** The typical refund before any was made. */
const DEFAULT_TYPICAL_REFUND = 1_000_000n;
const POSTGRES_MINIMUM = 150000;
const ZERO = /^0x0{40}$/;

const ok = (check: string, message: string): CheckResult => ({ check, status: 'ok', message });
const warn = (check: string, message: string, fix: string): CheckResult => ({ check, status: 'warn', message, fix });
const fail = (check: string, message: string, fix: string, refuse = false): CheckResult => ({
  check,
  status: 'fail',
  message,
  fix,
  ...(refuse && { refuse }),
});

const usdc = (atomic: bigint) => {
  const whole = atomic / 1_000_000n;
  const fraction = (atomic % 1_000_000n).toString().padStart(6, '0').replace(/0+$/, '');
  return `${whole}${fraction ? `.${fraction}` : ''} USDC`;
};
const why = (e: unknown) => ((e as { shortMessage?: string }).shortMessage ?? (e as Error).message).split('\n')[0];

// Typed as inferred: relating it to viem's general PublicClient type was the type check's slowest expression (2.4 s).
const chainClient = (rpcUrl: string) =>
  createPublicClient({ transport: http(rpcUrl, { timeout: NETWORK_TIMEOUT_MS, retryCount: 0 }) });

/** The chain behind X402_RPC_URL, read once per run: its chain id, or why it could not be read. */
class ChainReader {
  readonly client?: ReturnType<typeof chainClient>;
  private chainId?: Promise<number>;

  constructor(rpcUrl: string | undefined) {
    if (rpcUrl) this.client = chainClient(rpcUrl);
  }

  id(): Promise<number> {
    this.chainId ??= this.client!.getChainId();
    return this.chainId;
  }
}

function expectedChainId(network: string): number | undefined {
  const [namespace, reference] = network.split(':');
  return namespace === 'eip155' && /^[0-9]+$/.test(reference) ? Number(reference) : undefined;
}

function refundAddress(config: Config): Address | undefined {
  return config.refunds.privateKey && privateKeyToAccount(config.refunds.privateKey).address;
}

function environmentCheck(config: Config): CheckResult {
  if (config.production) return ok('environment', 'AUDIO_API_ENV=production');
  return warn(
    'environment',
    'AUDIO_API_ENV is development: serve would run its own chain and facilitator and use none of these settings',
    'set AUDIO_API_ENV=production where the service sells',
  );
}

function payToCheck(config: Config): CheckResult {
  const payTo = config.payments.payTo;
  if (!payTo)
    return fail(
      'payTo',
      'X402_PAY_TO is not set: nothing can be sold (quotes work, orders answer 503)',
      'set X402_PAY_TO to the address of the wallet that receives payments',
    );
  if (ZERO.test(payTo) || !/^0x[0-9a-fA-F]{40}$/.test(payTo))
    return fail(
      'payTo',
      `X402_PAY_TO ${payTo} is not an address anybody holds`,
      'set X402_PAY_TO to the wallet that receives payments',
      true,
    );
  const refunds = refundAddress(config);
  if (refunds && isAddressEqual(refunds, payTo as Address))
    return fail(
      'payTo',
      `X402_PAY_TO ${payTo} is the refund wallet: the hot wallet whose key this service holds would receive ` +
        `every payment`,
      'give refunds a separate hot wallet (X402_REFUND_KEY_FILE) holding only what refunds need',
      true,
    );
  return ok('payTo', `payments go to ${payTo}${refunds ? `, refunds come from ${refunds}` : ''}`);
}

async function chainIdCheck(config: Config, chain: ChainReader): Promise<CheckResult> {
  const { network, rpcUrl } = config.payments;
  const expected = expectedChainId(network);
  if (expected === undefined)
    return fail(
      'chain id',
      `X402_NETWORK ${network} is not an EVM network (eip155:<chain id>)`,
      'set X402_NETWORK to base, base-sepolia or eip155:<chain id>',
      true,
    );
  if (!chain.client)
    return fail(
      'chain id',
      'X402_RPC_URL is not set: payments cannot be proven nor refunds sent (orders answer 503)',
      `set X402_RPC_URL to a JSON-RPC endpoint of ${network} that accepts transactions (refunds are sent through it)`,
    );
  let actual: number;
  try {
    actual = await chain.id();
  } catch (e) {
    return fail(
      'chain id',
      `X402_RPC_URL ${rpcUrl} did not answer eth_chainId: ${why(e)}`,
      'check the URL, its API key and that this host reaches it',
    );
  }
  if (actual !== expected)
    return fail(
      'chain id',
      `X402_RPC_URL is chain id ${actual}, but X402_NETWORK ${network} is chain id ${expected}: payments ` +
        `would be looked for and refunds sent on another chain than buyers pay on`,
      `point X402_RPC_URL at a node of ${network}, or set X402_NETWORK to the network you sell on`,
      true,
    );
  return ok('chain id', `X402_RPC_URL is chain id ${actual} (${network})`);
}

async function assetCheck(config: Config, chain: ChainReader): Promise<CheckResult> {
  const { network, asset } = config.payments;
  const domain = assetDomain(network);
  const advertised = `"${domain.name}" version "${domain.version}"`;
  if (!asset)
    return fail(
      'asset',
      `no token is known for ${network}`,
      'set X402_ASSET to the USDC contract of that network (base and base-sepolia have theirs by default)',
      true,
    );
  const client = chain.client;
  const reason = !client
    ? 'no X402_RPC_URL'
    : await chain.id().then(
        (id) => (id === expectedChainId(network) ? undefined : 'the RPC is on another chain (chain id)'),
        () => 'the RPC did not answer (chain id)',
      );
  if (!client || reason) return warn('asset', `${asset} not checked: ${reason}`, 'fix the chain id check first');
  try {
    const code = await client.getCode({ address: asset as Address });
    if (!code || code === '0x')
      return fail(
        'asset',
        `there is no contract at X402_ASSET ${asset} on ${network}: buyers could not pay`,
        `set X402_ASSET to the USDC contract of ${network}, or unset it for the network's USDC`,
        true,
      );
    const [name, version] = await Promise.all([
      client.readContract({ address: asset as Address, abi: tokenAbi, functionName: 'name' }),
      client.readContract({ address: asset as Address, abi: tokenAbi, functionName: 'version' }),
    ]);
    if (name !== domain.name || version !== domain.version)
      return fail(
        'asset',
        `the token at ${asset} answers name "${name}" version "${version}", but the 402 advertises ` +
          `${advertised} for ${network}: every payment would be signed for the wrong EIP-712 domain and refused`,
        `set X402_NETWORK to the network this token is on, or X402_ASSET to ${network}'s USDC`,
        true,
      );
    return ok('asset', `${asset} answers name ${advertised}, as the 402 advertises`);
  } catch (e) {
    return fail(
      'asset',
      `the contract at ${asset} does not answer name() and version() (${why(e)}): it is not an EIP-3009 ` +
        `token like USDC`,
      `set X402_ASSET to the USDC contract of ${network}, or unset it for the network's USDC`,
      true,
    );
  }
}

/**
 * What would lose money: payTo, the chain behind the RPC and the token's domain. serve runs these before it starts
 * (refusing on a `refuse` failure); doctor runs them with the rest.
 */
export async function moneyChecks(config: Config): Promise<CheckResult[]> {
  const chain = new ChainReader(config.payments.rpcUrl);
  if (chain.client) chain.id().catch(() => undefined); // asked once, read by both checks
  return [payToCheck(config), await chainIdCheck(config, chain), await assetCheck(config, chain)];
}

function facilitatorUrls(config: Config): string[] {
  return (config.payments.facilitatorUrl ?? '')
    .split(',')
    .map((u) => u.trim())
    .filter(Boolean);
}

interface SupportedKind {
  x402Version?: number;
  scheme?: string;
  network?: string;
}

async function facilitatorChecks(config: Config): Promise<CheckResult[]> {
  const urls = facilitatorUrls(config);
  const network = config.payments.network;
  if (!urls.length)
    return [
      fail(
        'facilitator',
        'X402_FACILITATOR_URL is not set: nothing can be sold (orders answer 503)',
        'set X402_FACILITATOR_URL to an x402 v2 facilitator that settles exact payments on your network',
      ),
    ];
  let key: FacilitatorAuthKey | undefined;
  const keyFile = config.payments.facilitatorAuthKeyFile;
  try {
    key = keyFile ? readFacilitatorAuthKey(keyFile) : undefined;
  } catch (e) {
    return [
      fail('facilitator', `X402_FACILITATOR_AUTH_KEY_FILE ${keyFile}: ${why(e)}`, 'point it at the API key file'),
    ];
  }
  return Promise.all(
    urls.map(async (url) => {
      let kinds: SupportedKind[];
      try {
        // Hosted facilitators (CDP) want the same API-key JWT the service sends.
        const headers = key ? { Authorization: `Bearer ${facilitatorJwt(key, 'GET', `${url}/supported`)}` } : undefined;
        const answer = await fetch(`${url}/supported`, { headers, signal: AbortSignal.timeout(NETWORK_TIMEOUT_MS) });
        if (!answer.ok) throw new Error(`HTTP ${answer.status}`);
        kinds = ((await answer.json()) as { kinds?: SupportedKind[] }).kinds ?? [];
      } catch (e) {
        return fail(
          'facilitator',
          `${url}/supported did not answer: ${why(e)}`,
          'check X402_FACILITATOR_URL and that the facilitator runs and is reachable from here',
        );
      }
      const ours = kinds.find((k) => k.scheme === 'exact' && k.network === network && (k.x402Version ?? 2) === 2);
      if (ours) return ok('facilitator', `${url} settles exact payments on ${network} (x402 v2)`);
      const v2 = kinds.filter((k) => (k.x402Version ?? 2) === 2).map((k) => `${k.scheme} on ${k.network}`);
      const listed = v2.length
        ? `${v2.slice(0, 6).join(', ')}${v2.length > 6 ? ` and ${v2.length - 6} more` : ''}`
        : 'nothing for x402 v2';
      return fail(
        'facilitator',
        `${url} does not list exact on ${network} (x402 v2); it lists ${listed}`,
        `use a facilitator that settles on ${network}, or check X402_NETWORK`,
      );
    }),
  );
}

async function typicalRefund(db: Database | undefined): Promise<{ atomic: bigint; from: string }> {
  const [row] = db
    ? await db
        .query<{ average: string | null }>(
          `SELECT round(avg(amount_atomic))::text AS average FROM (SELECT amount_atomic FROM refunds
            WHERE amount_atomic > 0 AND status IN ('sent', 'pending') ORDER BY created_at DESC LIMIT 100) recent`,
        )
        .catch(() => [])
    : [];
  return row?.average
    ? { atomic: BigInt(row.average), from: 'the average of the last refunds' }
    : { atomic: DEFAULT_TYPICAL_REFUND, from: 'none made yet, counted at 1 USDC' };
}

async function refundWalletCheck(config: Config, db: Database | undefined): Promise<CheckResult> {
  const wallet = refundAddress(config);
  if (!wallet)
    return warn(
      'refund wallet',
      'no refund wallet: stops and undelivered orders keep their refunds pending until an instance has one',
      'set X402_REFUND_KEY_FILE to a file holding the 0x private key of a hot wallet of its own (not X402_PAY_TO)',
    );
  const { rpcUrl, asset } = config.payments;
  if (!rpcUrl || !asset)
    return warn('refund wallet', `${wallet}: balances not read without X402_RPC_URL`, 'set X402_RPC_URL');
  const chain = new ChainReader(rpcUrl);
  const client = chain.client!;
  const onChain = await chain.id().then(
    (id) => id === expectedChainId(config.payments.network),
    () => false,
  );
  if (!onChain)
    return warn(
      'refund wallet',
      `${wallet}: balances not read, see the chain id check`,
      'fix the chain id check first',
    );
  let eth: bigint;
  let held: bigint;
  let gasPrice: bigint;
  try {
    [eth, held, gasPrice] = await Promise.all([
      client.getBalance({ address: wallet }),
      client.readContract({ address: asset as Address, abi: tokenAbi, functionName: 'balanceOf', args: [wallet] }),
      client.getGasPrice(),
    ]);
  } catch (e) {
    return warn('refund wallet', `${wallet}: balances could not be read (${why(e)})`, 'fix the chain checks first');
  }
  const typical = await typicalRefund(db);
  const byGas = eth / ((gasPrice > 0n ? gasPrice : 1n) * REFUND_GAS);
  const byUsdc = held / typical.atomic;
  const holds =
    `${wallet} holds ${formatEther(eth)} ETH (gas for about ${byGas} refunds) and ${usdc(held)} ` +
    `(${byUsdc} typical refunds of ${usdc(typical.atomic)}: ${typical.from})`;
  const topUp = `send ETH (gas) and USDC to ${wallet}; refunds wait, pending, while it is short (refunds list)`;
  if (byGas < 1n || byUsdc < 1n) return fail('refund wallet', `${holds}: not one refund can be sent`, topUp);
  if (byGas < FEW_REFUNDS || byUsdc < FEW_REFUNDS) return warn('refund wallet', `${holds}: few refunds`, topUp);
  return ok('refund wallet', holds);
}

async function publicBaseUrlCheck(config: Config, catalogHash: string | undefined): Promise<CheckResult> {
  const base = config.publicBaseUrl;
  if (!base)
    return warn(
      'public URL',
      `PUBLIC_BASE_URL is not set: payment offers and links name the listen address ${config.host}:${config.port}`,
      'set PUBLIC_BASE_URL to the address agents reach this API at (https://…, without /api/v1)',
    );
  const url = `${base}/api/v1/health`;
  let health: {
    status?: string;
    catalog?: { content_hash?: string };
    checks?: Record<string, { ok: boolean }>;
    links?: unknown;
  };
  try {
    const answer = await fetch(url, { signal: AbortSignal.timeout(NETWORK_TIMEOUT_MS) });
    if (!answer.ok) throw new Error(`HTTP ${answer.status}`);
    health = (await answer.json()) as typeof health;
    if (!health?.links || !health.catalog) throw new Error('the answer is not this API’s health document');
  } catch (e) {
    return fail(
      'public URL',
      `${url} did not answer: ${why(e)}`,
      'start serve, or fix PUBLIC_BASE_URL, DNS or the proxy in front of the API',
    );
  }
  if (catalogHash && health.catalog?.content_hash !== catalogHash)
    return warn(
      'public URL',
      `${url} answers with another catalog (${health.catalog?.content_hash}, here ${catalogHash})`,
      'check that PUBLIC_BASE_URL reaches this deployment (or wait for its instances to reload)',
    );
  const degraded = Object.entries(health.checks ?? {})
    .filter(([, c]) => !c.ok)
    .map(([name]) => name);
  if (health.status !== 'ok')
    return warn(
      'public URL',
      `${url} answers, degraded: ${degraded.join(', ') || health.status}`,
      'GET /health/details on the metrics listener says why',
    );
  return ok('public URL', `${url} answers: ok`);
}

async function catalogCheck(config: Config): Promise<{ result: CheckResult; hash?: string }> {
  const { snapshot, diagnostics } = await openSnapshot(readSnapshotFiles(config.catalogDir, config.rulesDir));
  if (!snapshot)
    return {
      result: fail(
        'catalog',
        `${diagnostics.length} problem${diagnostics.length === 1 ? '' : 's'} in ${config.catalogDir} and ` +
          `${config.rulesDir}, first: ${formatDiagnostic(diagnostics[0])}`,
        'agent-audio catalog check shows each with its line; the service refuses this catalog',
      ),
    };
  const { catalog, hash } = snapshot;
  return {
    result: ok('catalog', `catalog_version ${catalog.settings.catalog_version}, ${catalog.products.length} products`),
    hash,
  };
}

async function webhookSecretsCheck(config: Config): Promise<CheckResult> {
  const { secretsKey, secretsKeyFile } = config.events;
  try {
    const box = await loadSecretBox({
      dataDir: config.dataDir,
      production: true,
      key: secretsKey,
      keyFile: secretsKeyFile,
    });
    if (box)
      return ok('webhook secrets', `key set (${secretsKey ? 'WEBHOOK_SECRETS_KEY' : 'WEBHOOK_SECRETS_KEY_FILE'})`);
  } catch (e) {
    return fail('webhook secrets', why(e), 'make a key with openssl rand -base64 32, the same on every instance');
  }
  return warn(
    'webhook secrets',
    'WEBHOOK_SECRETS_KEY is not set: this instance offers no webhooks (POST /webhooks answers 503; SSE works)',
    'set WEBHOOK_SECRETS_KEY_FILE to a file holding openssl rand -base64 32, the same on every instance',
  );
}

const migrationsDir = fileURLToPath(new URL('../store/migrations/', import.meta.url));

async function databaseChecks(db: Database): Promise<CheckResult[]> {
  let version: number;
  try {
    const [row] = await db.query<{ v: string }>("SELECT current_setting('server_version_num') AS v");
    version = Number(row.v);
  } catch (e) {
    return [
      fail(
        'postgres',
        `PostgreSQL did not answer: ${why(e)}`,
        'check DATABASE_URL: that the server runs and accepts this user from this host',
      ),
    ];
  }
  const shown = `${Math.floor(version / 10000)}.${version % 10000}`;
  const postgres =
    version >= POSTGRES_MINIMUM
      ? ok('postgres', `PostgreSQL ${shown}`)
      : fail('postgres', `PostgreSQL ${shown} is older than 15`, 'upgrade PostgreSQL to 15 or later');
  const files = (await readdir(migrationsDir)).filter((f) => f.endsWith('.sql')).sort();
  const applied = await db
    .query<{ name: string }>('SELECT name FROM schema_migrations')
    .then((rows) => new Set(rows.map((r) => r.name)))
    .catch(() => new Set<string>());
  const pending = files.filter((f) => !applied.has(f));
  const unknown = [...applied].filter((f) => !files.includes(f));
  const migrations = unknown.length
    ? warn(
        'migrations',
        `${unknown.length} migrations applied that this version does not have (${unknown.at(-1)}): a newer ` +
          `version migrated this database`,
        'run the same version as the other instances',
      )
    : pending.length
      ? warn(
          'migrations',
          `${pending.length} of ${files.length} migrations not applied yet (from ${pending[0]})`,
          'serve applies them at its start (one instance at a time); start one instance of this version first',
        )
      : ok('migrations', `all ${files.length} applied`);
  return [postgres, migrations];
}

async function hostsCheck(config: Config, db: Database): Promise<CheckResult> {
  let hosts: Awaited<ReturnType<typeof hostPoolReport>>;
  try {
    hosts = await hostPoolReport(db, config.streaming.downAfterSeconds);
  } catch (e) {
    return warn('streaming hosts', `not read: ${why(e)}`, 'fix the postgres and migrations checks first');
  }
  const live = hosts.filter((h) => h.live && h.state === 'up');
  const age = (h: (typeof hosts)[number]) =>
    h.heartbeat_age_seconds === null ? 'never' : `${h.heartbeat_age_seconds} s`;
  if (!hosts.length)
    return warn(
      'streaming hosts',
      'no streaming host registered: nothing can be sold until one runs',
      'start serve --role host (or --role all) with this DATABASE_URL',
    );
  if (!live.length)
    return fail(
      'streaming hosts',
      `none of ${hosts.length} hosts is up with a fresh heartbeat ` +
        `(${hosts.map((h) => `${h.id} ${h.state}, heartbeat ${age(h)}`).join('; ')}): nothing can be sold`,
      'start or fix the hosts (hosts list); undrain one that should take services',
    );
  const others = hosts.filter((h) => !live.includes(h));
  const summary = `${live.length} up and beating (${live.map((h) => `${h.id} ${age(h)} ago`).join(', ')})`;
  if (others.length)
    return warn(
      'streaming hosts',
      `${summary}; ${others.map((h) => `${h.id} ${h.state}, heartbeat ${age(h)}`).join('; ')}`,
      'hosts list shows them; remove a host retired for good (hosts remove ID)',
    );
  return ok('streaming hosts', summary);
}

/** This machine as a streaming host: whether what ICECAST_PROXY puts in front of Icecast is installed beside it. */
function streamingProxyCheck(config: Config): CheckResult {
  const name = 'streaming proxy';
  if (!installed('icecast2'))
    return ok(name, 'no icecast2 on this machine: it can run the API only (serve --role api)');
  const proxy = streamingProxy(config.streaming);
  if (proxy === 'haproxy' && installed('haproxy'))
    return ok(name, 'HAProxy holds the public streaming port and carries the audio (ICECAST_PROXY=haproxy)');
  if (proxy === 'haproxy')
    return fail(
      name,
      'haproxy is not installed: a streaming host (serve --role host or all) refuses to start on this machine',
      "run npm run setup (it installs Debian's haproxy), or set ICECAST_PROXY=front-door",
    );
  return warn(
    name,
    proxy === 'front-door'
      ? "ICECAST_PROXY=front-door: every listener's and source's bytes go through serve's one thread"
      : 'ICECAST_FRONT_DOOR=false: Icecast itself holds the public port (a listen backlog of 5)',
    'install haproxy (npm run setup) and leave ICECAST_PROXY and ICECAST_FRONT_DOOR unset',
  );
}

/** The database the checks read, or the failed check that says why there is none. */
export type PreflightDatabase = { db: Database } | { problem: CheckResult };

/** Every check, in the order the report shows them. */
export async function preflight(config: Config, database: PreflightDatabase): Promise<CheckResult[]> {
  const db = 'db' in database ? database.db : undefined;
  const catalog = await catalogCheck(config);
  const [money, facilitators, refunds, publicUrl, secrets, stored] = await Promise.all([
    moneyChecks(config),
    facilitatorChecks(config),
    refundWalletCheck(config, db),
    publicBaseUrlCheck(config, catalog.hash),
    webhookSecretsCheck(config),
    db
      ? databaseChecks(db).then(async (checks) => [...checks, await hostsCheck(config, db)])
      : [(database as { problem: CheckResult }).problem],
  ]);
  const proxy = streamingProxyCheck(config);
  return [
    environmentCheck(config),
    ...facilitators,
    ...money,
    refunds,
    publicUrl,
    ...stored,
    proxy,
    catalog.result,
    secrets,
  ];
}

/** ok, warn, FAIL: one line per check, what to do under it. */
export function reportLines(results: CheckResult[]): string {
  const width = Math.max(...results.map((r) => r.check.length));
  return results
    .map((r) => {
      const mark = { ok: 'ok  ', warn: 'warn', fail: 'FAIL' }[r.status];
      const line = `${mark}  ${r.check.padEnd(width)}  ${r.message}`;
      return r.fix && r.status !== 'ok' ? `${line}\n      ${' '.repeat(width)}  → ${r.fix}` : line;
    })
    .join('\n');
}

/** Exit status for scripts: 0 all ok, 1 a failure, 3 warnings only. */
export function exitStatus(results: CheckResult[]): number {
  if (results.some((r) => r.status === 'fail')) return 1;
  return results.some((r) => r.status === 'warn') ? 3 : 0;
}

/**
 * serve in production, before anything starts: refuses what would lose money (one error naming every such failure,
 * with what to do). Whatever else these checks find is logged with the rest once serve serves (warnPreflight).
 */
export async function refuseWhatLosesMoney(config: Config): Promise<void> {
  const results = await moneyChecks(config);
  const refused = results.filter((r) => r.status === 'fail' && r.refuse);
  if (refused.length)
    throw new Error(
      `serve refuses to start, a sale would lose money: ${refused.map((r) => `${r.message}. To fix: ${r.fix}`).join('; ')} (agent-audio doctor checks everything)`,
    );
}

/**
 * serve in production, once it serves: the rest of doctor's checks in the background, each one not ok logged as a
 * warning with what to do. Nothing is logged once the service stops (the returned function; it does not wait).
 */
export function warnPreflight(config: Config, log: Logger, db: Database): () => Promise<void> {
  let stopped = false;
  void (async () => {
    const catalog = await catalogCheck(config);
    const results = (
      await Promise.all([
        facilitatorChecks(config),
        moneyChecks(config),
        refundWalletCheck(config, db),
        publicBaseUrlCheck(config, catalog.hash),
        databaseChecks(db),
        hostsCheck(config, db),
        streamingProxyCheck(config),
        webhookSecretsCheck(config),
      ])
    ).flat();
    if (stopped) return;
    for (const r of results.filter((r) => r.status !== 'ok'))
      log.warn({ check: r.check, fix: r.fix }, `preflight: ${r.message}`);
    const count = (s: CheckStatus) => results.filter((r) => r.status === s).length;
    log.info(
      { ok: count('ok'), warnings: count('warn'), failures: count('fail') },
      'preflight done (agent-audio doctor shows the whole report)',
    );
  })().catch((err) => {
    if (!stopped) log.warn({ err }, 'preflight could not run');
  });
  return async () => {
    stopped = true;
  };
}
