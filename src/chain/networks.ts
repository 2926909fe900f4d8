/**
 * The networks X402_NETWORK may name (`base`, `base-sepolia`), with Circle's USDC there and its EIP-712 domain. No
 * imports: the configuration reads this on every command's start.
 */

/** A network payments may be made on by name, with its USDC. */
export interface UsdcNetwork {
  /** CAIP-2 id. */
  network: `eip155:${number}`;
  chainId: number;
  usdc: `0x${string}`;
  /** USDC's EIP-712 domain on that chain: what its name() and version() answer, and what a 402 must name. */
  domain: { name: string; version: string };
}

/**
 * Base and Base Sepolia, as @x402/evm lists their default assets (DEFAULT_ASSETS): on Base Sepolia USDC's EIP-712 name
 * is "USDC", not "USD Coin".
 */
export const USDC_NETWORKS = {
  base: {
    network: 'eip155:8453',
    chainId: 8453,
    usdc: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
    domain: { name: 'USD Coin', version: '2' },
  },
  'base-sepolia': {
    network: 'eip155:84532',
    chainId: 84532,
    usdc: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
    domain: { name: 'USDC', version: '2' },
  },
} as const satisfies Record<string, UsdcNetwork>;

export type NetworkName = keyof typeof USDC_NETWORKS;

/** The network X402_NETWORK names: one of USDC_NETWORKS by name, or undefined. */
export function namedNetwork(name: string): UsdcNetwork | undefined {
  return Object.hasOwn(USDC_NETWORKS, name) ? USDC_NETWORKS[name as NetworkName] : undefined;
}

/** The known network with this CAIP-2 id, if any. */
export function usdcNetwork(network: string): UsdcNetwork | undefined {
  return Object.values(USDC_NETWORKS).find((n) => n.network === network);
}

/**
 * The EIP-712 domain a payment on `network` is signed for, as the 402 advertises it (`extra`): that network's USDC's
 * (on a network not named here, USDC's as on Base). X402_ASSET, when set, is taken to answer the same domain:
 * `agent-audio doctor` and serve's start check that the contract does.
 */
export function assetDomain(network: string): { name: string; version: string } {
  return { ...(usdcNetwork(network) ?? USDC_NETWORKS.base).domain };
}
