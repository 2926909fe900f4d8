import { x402Facilitator } from '@x402/core/facilitator';
import { HTTPFacilitatorClient, type FacilitatorClient } from '@x402/core/server';
import type { Network, PaymentPayload, PaymentRequirements, SettleResponse, SupportedResponse } from '@x402/core/types';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { registerExactEvmScheme } from '@x402/evm/exact/facilitator';
import {
  createTestClient,
  createWalletClient,
  defineChain,
  encodeFunctionData,
  http,
  keccak256,
  publicActions,
  type Address,
  type Hex,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { createNonceManager, jsonRpc } from 'viem/nonce';
import { facilitatorAuthHeaders, type FacilitatorAuthKey } from './facilitator-auth.js';
import { FacilitatorPool } from './facilitator-pool.js';
import { shareSignatureRecoveries } from './recovery-memo.js';
import type { SettledReceipts } from './settled-receipts.js';

/** In-process facilitator that settles with its own key on an anvil chain (the embedded one, or one it attached to). */
export interface EmbeddedFacilitatorConfig {
  mode: 'embedded';
  rpcUrl: string;
  chainId: number;
  /** Pays the gas of settlements. */
  privateKey: Hex;
  /** Receipt polling; anvil mines within a few ms, so short is cheap and saves latency. */
  pollingIntervalMs?: number;
  /** Give up waiting for a settlement receipt after this long (the facilitator then reports it pending). */
  confirmationTimeoutMs?: number;
  /** Awaited after every successful settlement, before settle() resolves (e.g. chain.checkpoint). */
  onSettled?: (result: SettleResponse) => Promise<void> | void;
  /** Keeps the receipt of each settlement for the ledger's proof (saves it one RPC call per order). */
  receipts?: SettledReceipts;
  /** anvil only: mines a block while a receipt is late (default true; a real chain has its own block producer). */
  mineLateReceipts?: boolean;
  /**
   * A test fault: each settlement is signed at once but broadcast this much later, so that the facilitator answers
   * `settlement_pending` for a transfer that lands afterwards (as a congested chain or a slow facilitator does).
   */
  holdBroadcastMs?: number;
}

/** Facilitators over HTTP (the x402 v2 facilitator contract), one or several in the operator's order. */
export interface RemoteFacilitatorConfig {
  mode: 'remote';
  /** One address, or several separated by commas (X402_FACILITATOR_URL): tried in this order. */
  url: string | string[];
  /** How long one settle or /supported may take (X402_FACILITATOR_TIMEOUT_MS). */
  timeoutMs?: number;
  /** How long one verify may take (X402_FACILITATOR_VERIFY_TIMEOUT_MS; timeoutMs when unset). */
  verifyTimeoutMs?: number;
  /** The network payments are taken on: a facilitator whose /supported lacks it is skipped. */
  network?: string;
  /** An API key that signs a JWT for every request (X402_FACILITATOR_AUTH_KEY_FILE), for hosted facilitators. */
  auth?: FacilitatorAuthKey;
  /** Where the pool says which facilitator it skips or passes over, and why. */
  log?: (fields: Record<string, unknown>, message: string) => void;
}

export type FacilitatorConfig = EmbeddedFacilitatorConfig | RemoteFacilitatorConfig;

export interface Facilitator extends FacilitatorClient {
  mode: FacilitatorConfig['mode'];
  /** Remote mode: the facilitators, which one is usable and why not, and where each settlement may go. */
  pool?: FacilitatorPool;
}

/** The parts of an embedded chain (src/chain) that an embedded facilitator needs. */
export interface FacilitatorChain {
  rpcUrl: string;
  chainId: number;
  accounts: { facilitator: { privateKey: Hex } };
  checkpoint(): Promise<void>;
}

/** Settles as the chain's facilitator dev account and makes each settlement durable before answering. */
export function embeddedFacilitatorConfig(
  chain: FacilitatorChain,
  receipts?: SettledReceipts,
): EmbeddedFacilitatorConfig {
  return {
    receipts,
    mode: 'embedded',
    rpcUrl: chain.rpcUrl,
    chainId: chain.chainId,
    privateKey: chain.accounts.facilitator.privateKey,
    onSettled: () => chain.checkpoint(),
  };
}

export function createFacilitator(config: FacilitatorConfig): Facilitator {
  if (config.mode === 'remote') {
    const members = facilitatorUrls(config.url).map((url) => {
      const client = (timeoutMs: number | undefined) =>
        new HTTPFacilitatorClient({
          url,
          timeoutMs,
          ...(config.auth && { createAuthHeaders: facilitatorAuthHeaders(config.auth, url) }),
        });
      const settling = client(config.timeoutMs);
      const verifying = config.verifyTimeoutMs === config.timeoutMs ? settling : client(config.verifyTimeoutMs);
      return {
        url,
        client: {
          verify: verifying.verify.bind(verifying),
          settle: settling.settle.bind(settling),
          getSupported: settling.getSupported.bind(settling),
        },
      };
    });
    const pool = new FacilitatorPool(
      members,
      { scheme: 'exact', network: config.network ?? 'eip155:8453' },
      config.log ?? (() => {}),
    );
    return {
      mode: 'remote',
      pool,
      verify: (payload, requirements) => pool.verify(payload, requirements),
      settle: (payload, requirements) => pool.settle(payload, requirements),
      getSupported: () => pool.getSupported(),
    };
  }
  return createEmbeddedFacilitator(config);
}

/** The addresses of X402_FACILITATOR_URL: comma-separated, in order, each without a trailing slash. */
export function facilitatorUrls(value: string | string[]): string[] {
  const list = (Array.isArray(value) ? value : value.split(','))
    .map((url) => url.trim().replace(/\/+$/, ''))
    .filter(Boolean);
  return [...new Set(list)];
}

type SignerSource = Parameters<typeof toFacilitatorEvmSigner>[0];

/** A receipt later than this has been left in anvil's pool, not merely slowed down by a busy machine. */
const LATE_RECEIPT_MS = 1_000;

/**
 * anvil's automine can leave a ready transaction unmined when one sender's transactions arrive out of nonce order
 * (foundry-rs/foundry#10122): its receipt never comes and the settlement would be reported pending. While a receipt
 * is late, a block is mined every second; it takes in whatever the pool holds.
 */
async function mineWhileLate<T>(chain: { mine(args: { blocks: number }): Promise<void> }, wait: Promise<T>) {
  const timer = setInterval(() => void chain.mine({ blocks: 1 }).catch(() => undefined), LATE_RECEIPT_MS);
  try {
    return await wait;
  } finally {
    clearInterval(timer);
  }
}

type SettlingClient = ReturnType<typeof createWalletClient> & ReturnType<typeof publicActions>;

/** transferWithAuthorization costs about 90,000 gas; a smart-wallet signature check more. */
const HELD_SETTLEMENT_GAS = 300_000n;

/**
 * writeContract that signs now and broadcasts later: the hash is known at once, the transfer lands `delayMs` later.
 * Nonces are counted here: the node's pending count does not see transactions not sent yet.
 */
function heldBroadcast(client: SettlingClient, delayMs: number) {
  let next: Promise<number> | undefined;
  const nonce = async () => {
    const address = client.account!.address;
    next = (next ?? client.getTransactionCount({ address, blockTag: 'pending' })).then((n) => n + 1);
    return (await next) - 1;
  };
  return async (args: Parameters<SettlingClient['writeContract']>[0]): Promise<Hex> => {
    const {
      address,
      abi,
      functionName,
      args: callArgs,
    } = args as unknown as Parameters<typeof encodeFunctionData>[0] & {
      address: Address;
    };
    const data = encodeFunctionData({ abi, functionName, args: callArgs } as Parameters<typeof encodeFunctionData>[0]);
    const request = await client.prepareTransactionRequest({
      account: client.account!,
      chain: client.chain,
      to: address,
      data,
      nonce: await nonce(),
      // No estimate: a transfer that can no longer go through (it landed meanwhile) just reverts on chain.
      gas: HELD_SETTLEMENT_GAS,
    });
    const serializedTransaction = await client.signTransaction(request as never);
    setTimeout(
      () =>
        void client
          .sendRawTransaction({ serializedTransaction })
          .catch((e: Error) => process.stderr.write(`held settlement not sent: ${e.message.split('\n')[0]}\n`)),
      delayMs,
    );
    return keccak256(serializedTransaction);
  };
}

function createEmbeddedFacilitator(config: EmbeddedFacilitatorConfig): Facilitator {
  shareSignatureRecoveries();
  const pollingInterval = config.pollingIntervalMs ?? 10;
  const chain = defineChain({
    id: config.chainId,
    name: `eip155:${config.chainId}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [config.rpcUrl] } },
  });
  // Its own nonce manager: viem's shared one caches nonces per address and chain id across clients.
  const account = privateKeyToAccount(config.privateKey, {
    nonceManager: createNonceManager({ source: jsonRpc() }),
  });
  const client = createWalletClient({ account, chain, transport: http(config.rpcUrl), pollingInterval }).extend(
    publicActions,
  );
  const anvil = createTestClient({ mode: 'anvil', chain, transport: http(config.rpcUrl) });
  const network: Network = `eip155:${config.chainId}`;
  const facilitator = new x402Facilitator();
  // viem's verifyTypedData takes a stricter parameter union than x402's structural signer type.
  const mineLate = config.mineLateReceipts ?? true;
  const signerSource = {
    ...client,
    address: account.address,
    ...(config.holdBroadcastMs !== undefined && { writeContract: heldBroadcast(client, config.holdBroadcastMs) }),
    waitForTransactionReceipt: async (args: Parameters<typeof client.waitForTransactionReceipt>[0]) => {
      const wait = client.waitForTransactionReceipt(args);
      const receipt = await (mineLate ? mineWhileLate(anvil, wait) : wait);
      config.receipts?.remember(receipt);
      return receipt;
    },
  } as unknown as SignerSource;
  const signer = toFacilitatorEvmSigner(signerSource, {
    confirmationTimeoutMs: config.confirmationTimeoutMs ?? (config.holdBroadcastMs !== undefined ? 200 : 30_000),
  });
  registerExactEvmScheme(facilitator, { signer, networks: network });

  return {
    mode: 'embedded',
    verify: (payload: PaymentPayload, requirements: PaymentRequirements) => facilitator.verify(payload, requirements),
    settle: async (payload: PaymentPayload, requirements: PaymentRequirements) => {
      const result = await facilitator.settle(payload, requirements);
      if (result.success) await config.onSettled?.(result);
      return result;
    },
    // The in-process facilitator answers synchronously, with `network` typed as a plain string.
    getSupported: async () => facilitator.getSupported() as SupportedResponse,
  };
}
