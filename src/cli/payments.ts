import type { Address, Hex } from 'viem';
import { assetDomain, usdcNetwork, type UsdcNetwork } from '../chain/networks.js';
import { DEV_ACCOUNTS, DEV_ROLES, startEmbeddedChain, USDC_ADDRESS, type EmbeddedChain } from '../chain/index.js';
import type { CheckoutStatus } from '../http/index.js';
import type { Logger } from '../log/index.js';
import { RefundWallet } from '../refunds/index.js';
import { readFacilitatorAuthKey, type FacilitatorAuthKey } from '../payments/facilitator-auth.js';
import type { FacilitatorPool } from '../payments/facilitator-pool.js';
import { cachedProbe } from './cached-probe.js';
import type { PaymentSettings } from './config.js';
import {
  AuthorizationLedger,
  createFacilitator,
  embeddedFacilitatorConfig,
  OfferReceipts,
  PaymentGateway,
  SettledReceipts,
  type OperatorKey,
  type TokenLog,
} from '../payments/index.js';

/** What `dev.json`'s buyer holds after every start: enough for many demo purchases. */
const DEV_BUYER_FUNDS = 1_000_000_000n;

export interface Payments {
  checkout: CheckoutStatus;
  gateway?: PaymentGateway;
  ledger?: AuthorizationLedger;
  /** Development only: the local chain, a funded buyer and the refund wallet, written to dev.json. */
  dev?: {
    chain: { rpc_url: string; chain_id: number };
    buyer: { address: string; private_key: string };
    refund_wallet?: { address: string };
  };
  /**
   * Production: whether a facilitator can take payments now (answers and lists our network), read again at most every
   * few seconds; it keeps `checkout.available` and `checkout.reason` current for /health and /availability.
   */
  facilitatorHealth?: () => Promise<{ ok: boolean } & Record<string, unknown>>;
  /** Where refunds are paid from; without it they wait, with this reason. */
  refunds: { wallet?: RefundWallet; missingReason?: string };
  stop(): Promise<void>;
}

/** What payments() is given: the mode, where to keep the chain, the settings and keys. */
export interface PaymentOptions {
  production: boolean;
  dataDir: string;
  log: Logger;
  settings: PaymentSettings;
  operatorKey?: OperatorKey;
  refundKey?: Hex;
  devRefundFunds?: bigint;
}

/**
 * Machine payment: in production a remote facilitator named by the environment; in development an embedded
 * anvil chain with our USDC contract and the official facilitator in-process. Same gateway either way.
 */
export async function payments(options: PaymentOptions): Promise<Payments> {
  const settings = options.settings;
  const receipts = options.operatorKey && new OfferReceipts(options.operatorKey, settings.maxTimeoutSeconds);
  if (options.production) return productionPayments(options, receipts);
  const network = embeddedNetwork(settings.network);
  if (settings.chainRpcUrl)
    return attachToChain(
      { rpcUrl: settings.chainRpcUrl, network },
      settings.devFacilitatorAccount,
      settings.maxTimeoutSeconds,
      receipts,
      options.refundKey,
    );
  return embeddedPayments(options, network, receipts);
}

/** The network the development chain runs as: Base by default, Base Sepolia to rehearse (X402_NETWORK=base-sepolia). */
function embeddedNetwork(network: string): UsdcNetwork {
  const known = usdcNetwork(network);
  if (!known) throw new Error(`X402_NETWORK: the embedded chain runs as base or base-sepolia, not ${network}`);
  return known;
}

/** Production: the remote facilitators, the token read over X402_RPC_URL, refunds from X402_REFUND_KEY's wallet. */
async function productionPayments(options: PaymentOptions, receipts: OfferReceipts | undefined): Promise<Payments> {
  const settings = options.settings;
  const logWindow = settings.logWindowBlocks;
  const { network, maxTimeoutSeconds } = settings;
  const missing = Object.entries({
    X402_PAY_TO: settings.payTo,
    X402_FACILITATOR_URL: settings.facilitatorUrl,
    X402_RPC_URL: settings.rpcUrl,
  })
    .filter(([, v]) => !v)
    .map(([name]) => name);
  if (missing.length) {
    return {
      checkout: {
        available: false,
        configured: false,
        protocol: 'x402',
        network,
        reason: `machine payment is not configured for production: set ${missing.join(', ')}`,
      },
      refunds: {},
      stop: async () => {},
    };
  }
  const asset = settings.asset ?? USDC_ADDRESS;
  const facilitator = createFacilitator({
    mode: 'remote',
    url: settings.facilitatorUrl!,
    timeoutMs: settings.facilitatorTimeoutMs,
    verifyTimeoutMs: settings.facilitatorVerifyTimeoutMs,
    network,
    auth: settings.facilitatorAuthKeyFile ? facilitatorAuthKey(settings.facilitatorAuthKeyFile) : undefined,
    log: (fields, message) => options.log.warn({ component: 'facilitators', ...fields }, message),
  });
  const checkout: CheckoutStatus = { available: true, configured: true, protocol: 'x402', network };
  const gateway = new PaymentGateway(
    facilitator,
    { network, asset, payTo: settings.payTo!, maxTimeoutSeconds },
    receipts,
  );
  // /supported of each facilitator is read now (a hung one does not hold the start): what it says is on /health and
  // /availability from the start, and kept current there.
  const read = facilitator.pool!.refresh();
  await Promise.race([read, new Promise((resolve) => setTimeout(resolve, FACILITATOR_START_WAIT_MS).unref())]);
  return {
    checkout,
    facilitatorHealth: facilitatorHealth(facilitator.pool!, checkout),
    gateway,
    ledger: new AuthorizationLedger(settings.rpcUrl!, asset as Address, { windowBlocks: logWindow }),
    refunds: options.refundKey
      ? { wallet: refundWallet(settings.rpcUrl!, Number(network.split(':')[1]), asset as Address, options.refundKey) }
      : {
          missingReason:
            'refunds are not sent yet: this deployment has no refund wallet (the operator sets ' +
            'X402_REFUND_KEY); the refund is kept and sent once it has one',
        },
    stop: async () => gateway.close(),
  };
}

/** Development: an embedded anvil chain with our USDC and the official facilitator in-process. */
async function embeddedPayments(
  options: PaymentOptions,
  network: UsdcNetwork,
  receipts: OfferReceipts | undefined,
): Promise<Payments> {
  const settings = options.settings;
  const logWindow = settings.logWindowBlocks;
  const { maxTimeoutSeconds } = settings;
  const chain: EmbeddedChain = await startEmbeddedChain({
    dataDir: options.dataDir,
    network,
    onUnexpectedExit: (code) => options.log.error({ component: 'anvil', code }, 'the embedded chain exited'),
  });
  await chain.ensureFunded(chain.accounts.buyer.address, DEV_BUYER_FUNDS);
  const refundKey = options.refundKey ?? chain.accounts.refunds.privateKey;
  const wallet = refundWallet(chain.rpcUrl, chain.chainId, chain.usdcAddress, refundKey);
  if ((options.devRefundFunds ?? 0n) > 0n) await chain.ensureFunded(wallet.address, options.devRefundFunds!);
  // The proof is read from the settlement's own receipt when the ledger reads the same node the facilitator settles on.
  const settledReceipts = settings.rpcUrl ? undefined : new SettledReceipts();
  // The settlement is recorded once the checkpoint has saved the transfer (ledger.saved() in src/orders/advance.ts),
  // so the facilitator answers as soon as the transfer is mined.
  const facilitator = createFacilitator({ ...embeddedFacilitatorConfig(chain, settledReceipts), onSettled: undefined });
  options.log.info({ component: 'anvil', rpc_url: chain.rpcUrl }, 'embedded chain started');
  return {
    checkout: {
      available: true,
      configured: true,
      protocol: 'x402',
      network: chain.network,
      reason:
        `development: an embedded local chain (chain id ${chain.chainId}) with test USDC; see dev.json for a ` +
        `funded buyer wallet`,
    },
    gateway: new PaymentGateway(
      facilitator,
      { network: chain.network, asset: chain.usdcAddress, payTo: chain.accounts.payTo.address, maxTimeoutSeconds },
      receipts,
    ),
    // Reads may go through another endpoint (X402_RPC_URL), as they do in production.
    ledger: new AuthorizationLedger(settings.rpcUrl ?? chain.rpcUrl, chain.usdcAddress, {
      windowBlocks: logWindow,
      settledReceipts,
      save: () => chain.checkpoint(),
      mineIdle: true,
      archive: { firstLiveBlock: chain.firstLiveBlock, logs: (filter) => chain.archivedLogs(filter) as TokenLog[] },
    }),
    dev: {
      chain: { rpc_url: chain.rpcUrl, chain_id: chain.chainId },
      buyer: { address: chain.accounts.buyer.address, private_key: chain.accounts.buyer.privateKey },
      refund_wallet: { address: wallet.address },
    },
    refunds: { wallet },
    stop: () => chain.stop(),
  };
}

/**
 * Development with several instances: attach to the embedded chain another instance started (CHAIN_RPC_URL).
 * Each instance settles from its own dev account (DEV_FACILITATOR_ACCOUNT) so their transaction nonces never clash.
 */
function attachToChain(
  { rpcUrl, network: usdc }: { rpcUrl: string; network: UsdcNetwork },
  facilitatorAccount: number,
  maxTimeoutSeconds: number,
  receipts?: OfferReceipts,
  refundKey?: Hex,
): Payments {
  const { network, chainId, usdc: asset } = usdc;
  const facilitator = createFacilitator({
    mode: 'embedded',
    rpcUrl,
    chainId,
    privateKey: DEV_ACCOUNTS[facilitatorAccount].privateKey,
  });
  return {
    checkout: {
      available: true,
      configured: true,
      protocol: 'x402',
      network,
      reason: `development: attached to the local chain at ${rpcUrl}`,
    },
    gateway: new PaymentGateway(
      facilitator,
      { network, asset, payTo: DEV_ROLES.payTo.address, maxTimeoutSeconds },
      receipts,
    ),
    ledger: new AuthorizationLedger(rpcUrl, asset, { mineIdle: true }),
    dev: {
      chain: { rpc_url: rpcUrl, chain_id: chainId },
      buyer: { address: DEV_ROLES.buyer.address, private_key: DEV_ROLES.buyer.privateKey },
    },
    // Instances on one chain share the dev refund wallet: the refund nonce keeps two of them from paying twice.
    refunds: {
      wallet: refundWallet(rpcUrl, chainId, asset, refundKey ?? DEV_ROLES.refunds.privateKey),
    },
    stop: async () => {},
  };
}

/** How long /health and /availability answer from the last look at the facilitators (they are unauthenticated). */
const FACILITATOR_PROBE_MS = 5000;
/** How long the start waits for the facilitators' /supported before it goes on (they are read again later). */
const FACILITATOR_START_WAIT_MS = 3000;

function facilitatorHealth(pool: FacilitatorPool, checkout: CheckoutStatus) {
  const update = () => {
    const reason = pool.unavailableReason();
    checkout.available = reason === undefined;
    if (reason) checkout.reason = `checkout is unavailable: ${reason}`;
    else delete checkout.reason;
    return { ok: checkout.available, ...(reason && { reason }), facilitators: pool.states() };
  };
  pool.watch(update);
  update();
  return cachedProbe(FACILITATOR_PROBE_MS, () => pool.refresh().then(update));
}

/** The operator's API key for hosted facilitators; a file that cannot be used stops the start, saying why. */
function facilitatorAuthKey(file: string): FacilitatorAuthKey {
  try {
    return readFacilitatorAuthKey(file);
  } catch (e) {
    throw new Error(`X402_FACILITATOR_AUTH_KEY_FILE: ${(e as Error).message}`);
  }
}

/** Refunds are signed for the EIP-712 domain of the network's USDC, as the buyers' payments are. */
function refundWallet(rpcUrl: string, chainId: number, token: Address, privateKey: Hex): RefundWallet {
  const { name, version } = assetDomain(`eip155:${chainId}`);
  return new RefundWallet({ rpcUrl, chainId, token, privateKey, tokenName: name, tokenVersion: version });
}
