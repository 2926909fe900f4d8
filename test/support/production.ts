import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { DEV_ACCOUNTS, startEmbeddedChain, type EmbeddedChain } from '../../src/chain/index.js';
import { keysCommands } from '../../src/cli/keys-commands.js';
import { groupCommandInProcess } from './in-process-command.js';
import { prebuiltEntry } from './prebuilt-cli.js';
import { buy } from './purchase.js';
import { request, root, roomyCatalog, scratchDir, startService, type Service } from './service.js';
import { authorizationOf, type TestWallet } from './wallet.js';

/**
 * A production deployment as an operator makes it from other people's parts: a chain reached over RPC (anvil,
 * chain id 8453, our USDC at the Base address), facilitators in their own processes (`agent-audio facilitator`),
 * and `serve` with AUDIO_API_ENV=production pointed at them. Nothing of development mode (no dev.json, no chain
 * of its own, no in-process facilitator).
 */

/** Roles on the chain: nobody else uses these dev accounts in a test process. */
export const ROLES = {
  payTo: DEV_ACCOUNTS[6],
  refunds: DEV_ACCOUNTS[7],
  buyers: [DEV_ACCOUNTS[8], DEV_ACCOUNTS[2]],
};

export interface Chain {
  chain: EmbeddedChain;
  rpcUrl: string;
  stop(): Promise<void>;
}

/**
 * The chain a production deployment reads: blocks keep coming (one a second, like Base's sequencer) so that the
 * latest block's time tells when an authorization expired; transactions are still mined at once.
 */
export async function startChain(): Promise<Chain> {
  const chain = await startEmbeddedChain({ dataDir: await scratchDir('audio-prod-chain-') });
  const ticker = setInterval(() => void rpc(chain.rpcUrl, 'evm_mine', []).catch(() => undefined), 1000);
  return {
    chain,
    rpcUrl: chain.rpcUrl,
    stop: async () => {
      clearInterval(ticker);
      await chain.stop();
    },
  };
}

async function rpc(rpcUrl: string, method: string, params: unknown[]): Promise<unknown> {
  const answer = await fetch(rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return ((await answer.json()) as { result: unknown }).result;
}

export interface FacilitatorProcess {
  url: string;
  process: ChildProcess;
  output(): string;
  stop(): Promise<void>;
}

/** `agent-audio facilitator` in its own process, settling with one of the facilitator gas wallets. */
export async function startFacilitator(
  rpcUrl: string,
  options: { fault?: string; env?: Record<string, string> } = {},
): Promise<FacilitatorProcess> {
  const dir = await scratchDir('audio-facilitator-');
  const keyFile = join(dir, 'gas.key');
  // A gas wallet of its own: a facilitator stopped with a broadcast still held leaves a gap in its account's nonces.
  const gasKey = generatePrivateKey();
  await rpc(rpcUrl, 'anvil_setBalance', [privateKeyToAccount(gasKey).address, '0x56bc75e2d63100000']);
  await writeFile(keyFile, gasKey, { mode: 0o600 });
  const child = spawn(process.execPath, [...(await prebuiltEntry()), 'facilitator'], {
    cwd: root,
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: '0',
      FACILITATOR_RPC_URL: rpcUrl,
      FACILITATOR_KEY_FILE: keyFile,
      ...(options.fault && { FACILITATOR_FAULT: options.fault }),
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stderr!.on('data', (d) => {
    output += d;
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    let stdout = '';
    child.stdout!.on('data', (d) => {
      stdout += d;
      const found = /facilitator on (\S+)/.exec(stdout);
      if (found) resolve(found[1]);
    });
    void exited.then(() => reject(new Error(`the facilitator exited:\n${output}`)));
  });
  return {
    url,
    process: child,
    output: () => output,
    stop: async () => {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** serve in production mode over that chain and those facilitators, with a refund wallet and an agent's API key. */
export async function startProduction(
  chain: Chain,
  facilitatorUrl: string,
  env: Record<string, string> = {},
  payTo: string = ROLES.payTo.address,
  /** serve's own arguments, e.g. ['--role', 'api']. */
  args: string[] = [],
): Promise<Service> {
  const dir = await scratchDir('audio-prod-keys-');
  const refundKeyFile = join(dir, 'refund.key');
  await writeFile(refundKeyFile, ROLES.refunds.privateKey, { mode: 0o600 });
  await chain.chain.ensureFunded(ROLES.refunds.address, 100_000_000n);
  const service = await startService(
    {
      AUDIO_API_ENV: 'production',
      ...(await roomyCatalog()),
      X402_PAY_TO: payTo,
      X402_FACILITATOR_URL: facilitatorUrl,
      X402_RPC_URL: chain.rpcUrl,
      X402_REFUND_KEY_FILE: refundKeyFile,
      X402_MAX_TIMEOUT_SECONDS: '10',
      ORDER_LEASE_SECONDS: '3',
      ORDER_RECOVERY_INTERVAL_MS: '500',
      ...env,
    },
    { args },
  );
  // In this process (the keys commands' CLI runs are tested in test/api.test.ts): a CLI process costs half a second.
  try {
    const created = await groupCommandInProcess(
      keysCommands,
      ['keys', 'create', '--name', 'production test agent'],
      service.env,
    );
    service.apiKey = JSON.parse(created.stdout).api_key;
  } catch (e) {
    await service.stop();
    throw e;
  }
  return service;
}

/** The stream every purchase of these tests buys: the shipped catalog's smallest. */
export const SMALL_STREAM = {
  product_id: 'instant-stream',
  email: 'ops@example.com',
  station_name: 'Production FM',
  parameters: { duration_hours: 1, max_listeners: 5, bitrate_kbps: 64 },
};

/** GET /orders/{id} until `done` says so (or the time runs out). */
export async function orderWhen(
  service: Service,
  orderId: string,
  done: (state: string) => boolean,
  timeoutMs = 30_000,
  everyMs = 250,
): Promise<{ state: string; body: any }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await request(service, 'GET', `/orders/${orderId}`);
    const state = answer.body?.order?.status as string;
    if (done(state) || Date.now() > deadline) return { state, body: answer.body };
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * One address for the service's X402_FACILITATOR_URL whose facilitator behind it the test changes: each fault gets
 * its own facilitator process without starting the service again.
 */
export async function startFacilitatorSwitch(): Promise<{
  url: string;
  setUpstream(url: string): void;
  close(): Promise<void>;
}> {
  let upstream = '';
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const init = {
      method: req.method,
      headers: { 'content-type': 'application/json' },
      ...(req.method === 'POST' && { body: Buffer.concat(chunks) }),
    };
    const answer = await fetch(`${upstream}${req.url}`, init).catch(() => undefined);
    if (!answer) return void res.destroy();
    res.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    setUpstream: (url) => {
      upstream = url;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** At most `places` calls of the returned function run at once; the others wait their turn. */
export function limiter(places: number) {
  let free = places;
  const queue: Array<() => void> = [];
  return async <T>(work: () => Promise<T>): Promise<T> => {
    if (free === 0) await new Promise<void>((resolve) => queue.push(resolve));
    else free--;
    try {
      return await work();
    } finally {
      const next = queue.shift();
      if (next) next();
      else free++;
    }
  };
}

/** One agent's purchase: every payment it signed, every order it was answered with, every answer. */
export interface AgentPurchase {
  key: string;
  signatures: string[];
  orderIds: Set<string>;
  /** Each answer: its status and error code, the order it names, how long it took (with the 402 before it). */
  answers: Array<{ status: number; code?: string; orderId?: string; ms: number }>;
  final: { status: number; headers: Headers; body: any };
}

/**
 * An agent buying SMALL_STREAM and doing what each answer says: the same request again (same payment, same key) while
 * the outcome is unknown or the network did not answer; a new payment once — only once — when told nothing was
 * charged.
 */
export async function agentBuysStream(
  service: Service,
  wallet: TestWallet,
  slot: ReturnType<typeof limiter>,
): Promise<AgentPurchase> {
  const purchase: AgentPurchase = {
    key: randomUUID(),
    signatures: [],
    orderIds: new Set(),
    answers: [],
    final: undefined!,
  };
  let asked = performance.now();
  const note = (answer: AgentPurchase['final']) => {
    const orderId = answer.body?.order?.id ?? answer.body?.error?.details?.[0]?.order_id;
    if (orderId) purchase.orderIds.add(orderId);
    const ms = Math.round(performance.now() - asked);
    purchase.answers.push({ status: answer.status, code: answer.body?.error?.code, orderId, ms });
    purchase.final = answer;
    return answer;
  };
  const timed = <T>(work: () => Promise<T>) => {
    asked = performance.now();
    return work();
  };
  const resend = () =>
    request(service, 'POST', '/orders', {
      body: SMALL_STREAM,
      headers: { 'idempotency-key': purchase.key, 'payment-signature': purchase.signatures.at(-1)! },
    });
  let answer = note(
    await slot(() => timed(() => buy(service, wallet, SMALL_STREAM, purchase.key, purchase.signatures))),
  );
  let paidAgain = false;
  for (let round = 0; round < 120 && answer.status !== 200; round++) {
    const code = answer.body?.error?.code;
    if ((code === 'payment_failed' || code === 'payment_rejected') && !paidAgain) {
      paidAgain = true;
      answer = note(
        await slot(() => timed(() => buy(service, wallet, SMALL_STREAM, purchase.key, purchase.signatures))),
      );
    } else if (code === 'settlement_pending' && purchase.orderIds.size) {
      // As the answer suggests: follow the order (a cheap read), then ask again once its outcome is known.
      const id = [...purchase.orderIds].at(-1)!;
      await orderWhen(service, id, (state) => state !== 'settling', 30_000, 1000);
      answer = note(await slot(() => timed(resend)));
    } else if (['settlement_pending', 'payment_network_unavailable', 'idempotency_in_progress'].includes(code)) {
      // As Retry-After says, shortened: the authorizations of these tests are valid for 10 s only.
      await new Promise((r) => setTimeout(r, Math.min(Number(answer.headers.get('retry-after') ?? 1), 2) * 1000));
      answer = note(
        await slot(() =>
          timed(() =>
            purchase.signatures.length
              ? resend()
              : buy(service, wallet, SMALL_STREAM, purchase.key, purchase.signatures),
          ),
        ),
      );
    } else break;
  }
  return purchase;
}

/** Purchases counted on the token once no order is left unfinished: charged, delivered, refunded, charged twice. */
export async function tallyOnChain(service: Service, chain: Chain, purchases: AgentPurchase[]) {
  for (const id of purchases.flatMap((p) => [...p.orderIds])) {
    await orderWhen(service, id, (state) => !['settling', 'provisioning', 'claimed'].includes(state), 60_000);
  }
  const counts = {
    purchases: purchases.length,
    charged: 0,
    delivered: 0,
    refunded: 0,
    doubleCharges: 0,
    paidNotDelivered: 0,
  };
  for (const p of purchases) {
    let charged = 0;
    for (const signature of p.signatures) {
      const { from, nonce } = authorizationOf(signature);
      if (await chain.chain.authorizationState(from, nonce)) charged++;
    }
    const states = await Promise.all(
      [...p.orderIds].map(async (id) => (await request(service, 'GET', `/orders/${id}`)).body.order.status as string),
    );
    const refunded = states.filter((s) => s === 'refunded').length;
    const delivered = p.final.status === 200 ? 1 : 0;
    counts.charged += charged;
    counts.refunded += refunded;
    counts.delivered += delivered;
    if (charged - refunded > delivered) {
      if (delivered) counts.doubleCharges++;
      else counts.paidNotDelivered++;
    }
  }
  return counts;
}
