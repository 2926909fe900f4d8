import type { Address } from 'viem';
import { startEmbeddedChain, type EmbeddedChain } from '../chain/index.js';
import type { CheckoutStatus } from '../http/index.js';
import type { Logger } from '../log/index.js';
import { AuthorizationLedger, createFacilitator, embeddedFacilitatorConfig, PaymentGateway } from '../payments/index.js';

const BASE_USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
/** What `dev.json`'s buyer holds after every start: enough for many demo purchases. */
const DEV_BUYER_FUNDS = 1_000_000_000n;

export interface Payments {
  checkout: CheckoutStatus;
  gateway?: PaymentGateway;
  ledger?: AuthorizationLedger;
  /** Development only: the local chain and a funded buyer, written to dev.json. */
  dev?: { chain: { rpc_url: string; chain_id: number }; buyer: { address: string; private_key: string } };
  stop(): Promise<void>;
}

/**
 * Machine payment: in production a remote facilitator named by the environment; in development an embedded
 * anvil chain with our USDC contract and the official facilitator in-process. Same gateway either way.
 */
export async function payments(options: { production: boolean; dataDir: string; log: Logger; env?: NodeJS.ProcessEnv }): Promise<Payments> {
  const env = options.env ?? process.env;
  const network = (env.X402_NETWORK ?? 'eip155:8453') as `${string}:${string}`;
  const maxTimeoutSeconds = Number(env.X402_MAX_TIMEOUT_SECONDS ?? 300);

  if (options.production) {
    const missing = ['X402_PAY_TO', 'X402_FACILITATOR_URL', 'X402_RPC_URL'].filter((name) => !env[name]);
    if (missing.length) {
      return { checkout: { available: false, configured: false, protocol: 'x402', network, reason: `machine payment is not configured for production: set ${missing.join(', ')}` }, stop: async () => {} };
    }
    const asset = env.X402_ASSET ?? BASE_USDC;
    const facilitator = createFacilitator({ mode: 'remote', url: env.X402_FACILITATOR_URL! });
    return {
      checkout: { available: true, configured: true, protocol: 'x402', network },
      gateway: new PaymentGateway(facilitator, { network, asset, payTo: env.X402_PAY_TO!, maxTimeoutSeconds }),
      ledger: new AuthorizationLedger(env.X402_RPC_URL!, asset as Address),
      stop: async () => {},
    };
  }

  const chain: EmbeddedChain = await startEmbeddedChain({
    dataDir: options.dataDir,
    onUnexpectedExit: (code) => options.log.error({ component: 'anvil', code }, 'the embedded chain exited'),
  });
  await chain.ensureFunded(chain.accounts.buyer.address, DEV_BUYER_FUNDS);
  const facilitator = createFacilitator(embeddedFacilitatorConfig(chain));
  options.log.info({ component: 'anvil', rpc_url: chain.rpcUrl }, 'embedded chain started');
  return {
    checkout: {
      available: true,
      configured: true,
      protocol: 'x402',
      network: chain.network,
      reason: `development: an embedded local chain (chain id ${chain.chainId}) with test USDC; see dev.json for a funded buyer wallet`,
    },
    gateway: new PaymentGateway(facilitator, { network: chain.network, asset: chain.usdcAddress, payTo: chain.accounts.payTo.address, maxTimeoutSeconds }),
    ledger: new AuthorizationLedger(chain.rpcUrl, chain.usdcAddress),
    dev: {
      chain: { rpc_url: chain.rpcUrl, chain_id: chain.chainId },
      buyer: { address: chain.accounts.buyer.address, private_key: chain.accounts.buyer.privateKey },
    },
    stop: () => chain.stop(),
  };
}
