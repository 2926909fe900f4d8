import { createPublicClient, createWalletClient, defineChain, http, parseAbi, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { DEV_ROLES, USDC_ADDRESS } from '../../src/chain/index.js';

const abi = parseAbi([
  'function mint(address to, uint256 amount) returns (bool)',
  'function balanceOf(address account) view returns (uint256)',
]);

function chainOf(rpcUrl: string) {
  return defineChain({
    id: 8453,
    name: 'local',
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
}

const mints = new Map<string, Promise<unknown>>();

/**
 * Mints test USDC to an address (as the dev token's minter), mined when this resolves. Mints of this process go one
 * at a time (the minter's nonce), and one that meets a nonce already taken (serve's own minting) is sent again.
 */
export function mintUsdc(rpcUrl: string, to: string, atomic: bigint): Promise<void> {
  const turn = (mints.get(rpcUrl) ?? Promise.resolve()).then(() => mintWithRetry(rpcUrl, to, atomic));
  mints.set(
    rpcUrl,
    turn.catch(() => undefined),
  );
  return turn;
}

async function mintWithRetry(rpcUrl: string, to: string, atomic: bigint): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await mintOnce(rpcUrl, to, atomic);
    } catch (e) {
      if (attempt >= 5 || !/nonce too low|nonce.*lower/i.test(String((e as Error).message))) throw e;
    }
  }
}

async function mintOnce(rpcUrl: string, to: string, atomic: bigint): Promise<void> {
  const chain = chainOf(rpcUrl);
  const wallet = createWalletClient({
    account: privateKeyToAccount(DEV_ROLES.minter.privateKey),
    chain,
    transport: http(rpcUrl),
    pollingInterval: 20,
  });
  const reader = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 20 });
  const hash = await wallet.writeContract({
    address: USDC_ADDRESS,
    abi,
    functionName: 'mint',
    args: [to as Address, atomic],
  });
  await reader.waitForTransactionReceipt({ hash });
}

export function usdcBalance(rpcUrl: string, owner: string): Promise<bigint> {
  return createPublicClient({ chain: chainOf(rpcUrl), transport: http(rpcUrl) }).readContract({
    address: USDC_ADDRESS,
    abi,
    functionName: 'balanceOf',
    args: [owner as Address],
  });
}

/** The payload of a compact JWS (the signature is checked by the tests that need it). */
export function jwsPayload(jws: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jws.split('.')[1], 'base64url').toString('utf8')) as Record<string, unknown>;
}
