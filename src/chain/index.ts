import { join } from 'node:path';
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  http,
  publicActions,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { createNonceManager, jsonRpc } from 'viem/nonce';
import { DEV_ACCOUNTS, DEV_ROLES, type DevAccounts } from './accounts.js';
import { startAnvil } from './anvil.js';
import { loadArtifacts } from './contracts.js';
import { writeAnvilGenesis } from './genesis.js';
import { isEmptyDelta, mergeDelta, StateJournal, type StateDelta } from './state.js';
import { MULTICALL3_ADDRESS, readLedgerDelta, tokenAbi, USDC_ADDRESS } from './token.js';

export { DEV_ACCOUNTS, DEV_ROLES, type DevAccount, type DevAccounts } from './accounts.js';
export { MULTICALL3_ADDRESS, tokenAbi, USDC_ADDRESS, USDC_DECIMALS, USDC_NAME, USDC_VERSION } from './token.js';

export const EMBEDDED_CHAIN_ID = 8453;

export interface EmbeddedChainOptions {
  /** Holds chain-state.jsonl (the ledger that survives restarts) and anvil-genesis.json. */
  dataDir: string;
  host?: string;
  /** 0 (default) lets anvil pick a free port. */
  port?: number;
  /** How often the ledger is also saved without being asked (ms). */
  checkpointIntervalMs?: number;
  /** Further anvil options (experiments). */
  anvilArgs?: string[];
  /** Called if anvil dies while the chain has not been stopped. */
  onUnexpectedExit?: (code: number | null) => void;
}

export interface EmbeddedChain {
  rpcUrl: string;
  chainId: number;
  /** CAIP-2 id, e.g. "eip155:8453". */
  network: `eip155:${number}`;
  usdcAddress: Address;
  multicall3Address: Address;
  /** DEV-ONLY well-known anvil keys. */
  accounts: DevAccounts;
  /** pid of the anvil process. */
  pid: number;
  viemChain: Chain;
  publicClient: PublicClient;
  mintUsdc(to: Address, atomic: bigint): Promise<Hex>;
  usdcBalance(address: Address): Promise<bigint>;
  authorizationState(authorizer: Address, nonce: Hex): Promise<boolean>;
  /** Mints the shortfall so that `address` holds at least `minimumAtomic`; returns the new balance. */
  ensureFunded(address: Address, minimumAtomic: bigint): Promise<bigint>;
  /** Saves every ledger change mined so far to the data dir; resolves once it is on disk. */
  checkpoint(): Promise<void>;
  /** Checkpoints, then stops anvil. Idempotent. */
  stop(): Promise<void>;
}

export function localViemChain(chainId: number, rpcUrl: string): Chain {
  return defineChain({
    id: chainId,
    name: `Local anvil ${chainId}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
    contracts: { multicall3: { address: MULTICALL3_ADDRESS } },
  });
}

/**
 * Starts a fresh anvil chain (block 0) with the dev USDC and Multicall3 installed and the ledger
 * saved in `dataDir` restored: balances, allowances, used/canceled authorization nonces, account nonces.
 */
export async function startEmbeddedChain(options: EmbeddedChainOptions): Promise<EmbeddedChain> {
  const { dataDir, host = '127.0.0.1', port = 0, checkpointIntervalMs = 1000 } = options;
  const { journal, state } = await StateJournal.open(join(dataDir, 'chain-state.jsonl'));
  const genesisFile = join(dataDir, 'anvil-genesis.json');
  await writeAnvilGenesis(genesisFile, state, loadArtifacts());

  let anvil;
  try {
    anvil = await startAnvil({
      host,
      port,
      chainId: EMBEDDED_CHAIN_ID,
      loadStateFile: genesisFile,
      extraArgs: options.anvilArgs,
      onUnexpectedExit: options.onUnexpectedExit,
    });
  } catch (error) {
    await journal.close();
    throw error;
  }
  const viemChain = localViemChain(EMBEDDED_CHAIN_ID, anvil.rpcUrl);
  // batch: the reads of one checkpoint travel in a single HTTP request.
  const publicClient = createPublicClient({
    chain: viemChain,
    transport: http(anvil.rpcUrl, { batch: true }),
    pollingInterval: 10,
  }) as PublicClient;
  const minter = createWalletClient({
    account: privateKeyToAccount(DEV_ROLES.minter.privateKey, { nonceManager: createNonceManager({ source: jsonRpc() }) }),
    chain: viemChain,
    transport: http(anvil.rpcUrl),
    pollingInterval: 10,
  }).extend(publicActions);

  let syncedBlock = 0n;
  let queue: Promise<void> = Promise.resolve();
  const syncLedger = async (): Promise<void> => {
    const latest = await publicClient.getBlockNumber({ cacheTime: 0 });
    if (latest <= syncedBlock) return;
    const [ledger, nonces] = await Promise.all([
      readLedgerDelta(publicClient, syncedBlock + 1n, latest, state),
      Promise.all(
        DEV_ACCOUNTS.map((account) => publicClient.getTransactionCount({ address: account.address, blockNumber: latest })),
      ),
    ]);
    const delta: StateDelta = { ...ledger, accountNonces: {} };
    DEV_ACCOUNTS.forEach(({ address }, i) => {
      if (nonces[i] !== (state.accountNonces[address] ?? 0)) delta.accountNonces![address] = nonces[i];
    });
    if (!isEmptyDelta(delta)) {
      await journal.append(delta);
      mergeDelta(state, delta);
    }
    syncedBlock = latest;
  };
  const checkpoint = (): Promise<void> => (queue = queue.catch(() => undefined).then(syncLedger));
  const timer = setInterval(() => checkpoint().catch(() => undefined), checkpointIntervalMs);
  timer.unref();

  const usdcBalance = (address: Address) =>
    publicClient.readContract({ address: USDC_ADDRESS, abi: tokenAbi, functionName: 'balanceOf', args: [address] });

  const mintUsdc = async (to: Address, atomic: bigint): Promise<Hex> => {
    const hash = await minter.writeContract({ address: USDC_ADDRESS, abi: tokenAbi, functionName: 'mint', args: [to, atomic] });
    const receipt = await minter.waitForTransactionReceipt({ hash });
    if (receipt.status !== 'success') throw new Error(`mint reverted: ${hash}`);
    await checkpoint();
    return hash;
  };

  // Serialized so two concurrent calls for one address do not both mint the shortfall.
  let funding: Promise<bigint> = Promise.resolve(0n);

  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      clearInterval(timer);
      try {
        await checkpoint();
      } finally {
        await journal.close();
        await anvil.stop();
      }
    })());

  return {
    rpcUrl: anvil.rpcUrl,
    chainId: EMBEDDED_CHAIN_ID,
    network: `eip155:${EMBEDDED_CHAIN_ID}`,
    usdcAddress: USDC_ADDRESS,
    multicall3Address: MULTICALL3_ADDRESS,
    accounts: DEV_ROLES,
    pid: anvil.pid,
    viemChain,
    publicClient,
    mintUsdc,
    usdcBalance,
    authorizationState: (authorizer, nonce) =>
      publicClient.readContract({
        address: USDC_ADDRESS,
        abi: tokenAbi,
        functionName: 'authorizationState',
        args: [authorizer, nonce],
      }),
    ensureFunded: (address, minimumAtomic) =>
      (funding = funding.catch(() => 0n).then(async () => {
        const balance = await usdcBalance(address);
        if (balance >= minimumAtomic) return balance;
        await mintUsdc(address, minimumAtomic - balance);
        return minimumAtomic;
      })),
    checkpoint,
    stop,
  };
}
