import { join } from 'node:path';
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  http,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
  type Transport,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { createNonceManager, jsonRpc } from 'viem/nonce';
import { DEV_ROLES, type DevAccounts } from './accounts.js';
import { startAnvil } from './anvil.js';
import { coalesce } from './coalesce.js';
import { loadArtifacts } from './contracts.js';
import { writeAnvilGenesis } from './genesis.js';
import { LedgerSync } from './ledger-sync.js';
import { StateJournal, type ArchivedLog, type ChainState } from './state.js';
import { USDC_NETWORKS, type UsdcNetwork } from './networks.js';
import { MULTICALL3_ADDRESS, tokenAbi } from './token.js';

export const EMBEDDED_CHAIN_ID = USDC_NETWORKS.base.chainId;

/**
 * anvil options that keep it fast over a long uptime (bench/orders.ts, "chain slowdown": settle latency
 * stays flat after +2000 and +6000 blocks instead of doubling and quadrupling). anvil recomputes the whole
 * state root for every block, so a block costs in proportion to the storage slots in the state: from
 * Prague on, the EIP-2935 history contract stores one block hash per block (up to 8191 of them), so every
 * block, and so every settle, got slower as the chain grew. Cancun is the newest hardfork without it (the
 * contracts are compiled for Cancun). --prune-history 16 keeps the last 16 states in memory (reads a few
 * blocks behind the head still work; a checkpoint reads blocks and logs, not old states) and none on
 * disk: by default anvil writes older states to ~/.foundry/anvil/tmp, a few hundred kB per block, and
 * leaves them behind when it is stopped.
 */
export const EMBEDDED_ANVIL_ARGS: readonly string[] = ['--hardfork', 'cancun', '--prune-history', '16'];

export interface EmbeddedChainOptions {
  /** Holds chain-state.jsonl (the ledger that survives restarts) and anvil-genesis.json. */
  dataDir: string;
  host?: string;
  /** 0 (default) lets anvil pick a free port. */
  port?: number;
  /** How often the ledger is also saved without being asked (ms). */
  checkpointIntervalMs?: number;
  /** anvil options instead of EMBEDDED_ANVIL_ARGS (for comparisons). */
  anvilArgs?: readonly string[];
  /** The network it runs as, with that network's chain id and USDC address (default Base). */
  network?: UsdcNetwork;
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
  /**
   * Saves every ledger change mined so far to the data dir; resolves once it is on disk. Concurrent
   * calls share the work: one round of reads and one journal append serves every caller that came before it.
   */
  checkpoint(): Promise<void>;
  /**
   * The first block of this run of the node: earlier blocks are gone from it, their token logs are in `archivedLogs`.
   */
  firstLiveBlock: bigint;
  /** The token's logs of blocks before `firstLiveBlock`, kept across restarts as a real chain keeps its history. */
  archivedLogs(filter: { fromBlock: bigint; toBlock: bigint; topics: Array<Hex | Hex[] | null> }): ArchivedLog[];
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
  const { checkpointIntervalMs = 1000 } = options;
  const network = options.network ?? USDC_NETWORKS.base;
  const { journal, state } = await StateJournal.open(join(options.dataDir, stateFileOf(network)));
  // Block numbers go on from the last saved block, so heights recorded before a restart still mean the same block.
  const firstLiveBlock = BigInt(state.height) === 0n ? 0n : BigInt(state.height) + 1n;
  const history = state.logs.filter((log) => BigInt(log.blockNumber) < firstLiveBlock);
  const anvil = await launchAnvil(options, network, state, firstLiveBlock).catch(async (error) => {
    await journal.close();
    throw error;
  });
  const { viemChain, publicClient, minter } = clients(anvil.rpcUrl, network.chainId);
  const token = network.usdc;
  const ledger = new LedgerSync({ rpcUrl: anvil.rpcUrl, journal, state, syncedBlock: firstLiveBlock, token });
  const checkpoint = coalesce(() => ledger.sync());
  const timer = setInterval(() => checkpoint().catch(() => undefined), checkpointIntervalMs);
  timer.unref();

  const usdcBalance = (address: Address) =>
    publicClient.readContract({ address: token, abi: tokenAbi, functionName: 'balanceOf', args: [address] });
  const mintUsdc = async (to: Address, atomic: bigint): Promise<Hex> => {
    const hash = await minter.writeContract({
      address: token,
      abi: tokenAbi,
      functionName: 'mint',
      args: [to, atomic],
    });
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
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
    chainId: network.chainId,
    network: network.network,
    usdcAddress: token,
    multicall3Address: MULTICALL3_ADDRESS,
    accounts: DEV_ROLES,
    pid: anvil.pid,
    viemChain,
    publicClient,
    mintUsdc,
    usdcBalance,
    authorizationState: (authorizer, nonce) =>
      publicClient.readContract({
        address: token,
        abi: tokenAbi,
        functionName: 'authorizationState',
        args: [authorizer, nonce],
      }),
    ensureFunded: (address, minimumAtomic) =>
      (funding = funding
        .catch(() => 0n)
        .then(async () => {
          const balance = await usdcBalance(address);
          if (balance >= minimumAtomic) return balance;
          await mintUsdc(address, minimumAtomic - balance);
          return minimumAtomic;
        })),
    checkpoint,
    firstLiveBlock,
    archivedLogs: (filter) => history.filter((log) => inFilter(log, filter)),
    stop,
  };
}

/** anvil on a genesis holding the saved ledger, numbering blocks on from the last saved one. */
async function launchAnvil(
  options: EmbeddedChainOptions,
  network: UsdcNetwork,
  state: ChainState,
  firstLiveBlock: bigint,
) {
  const genesisFile = join(options.dataDir, 'anvil-genesis.json');
  await writeAnvilGenesis(genesisFile, state, loadArtifacts(), { address: network.usdc, name: network.domain.name });
  return startAnvil({
    host: options.host ?? '127.0.0.1',
    port: options.port ?? 0,
    chainId: network.chainId,
    loadStateFile: genesisFile,
    extraArgs: [
      ...(options.anvilArgs ?? EMBEDDED_ANVIL_ARGS),
      ...(firstLiveBlock > 0n ? ['--number', String(firstLiveBlock)] : []),
    ],
    onUnexpectedExit: options.onUnexpectedExit,
  });
}

/** Each network's ledger in a file of its own: a data dir rehearsing on Base Sepolia keeps its Base ledger apart. */
function stateFileOf(network: UsdcNetwork): string {
  return network.chainId === EMBEDDED_CHAIN_ID ? 'chain-state.jsonl' : `chain-state-${network.chainId}.jsonl`;
}

/** A reading client and the minter's wallet client on the chain at rpcUrl. */
function clients(rpcUrl: string, chainId: number) {
  const viemChain = localViemChain(chainId, rpcUrl);
  const publicClient: PublicClient = createPublicClient<Transport, Chain>({
    chain: viemChain,
    transport: http(rpcUrl),
    pollingInterval: 10,
  });
  const minter = createWalletClient({
    account: privateKeyToAccount(DEV_ROLES.minter.privateKey, {
      nonceManager: createNonceManager({ source: jsonRpc() }),
    }),
    chain: viemChain,
    transport: http(rpcUrl),
    pollingInterval: 10,
  });
  return { viemChain, publicClient, minter };
}

type LogFilter = Parameters<EmbeddedChain['archivedLogs']>[0];

function inFilter(log: ArchivedLog, filter: LogFilter): boolean {
  const block = BigInt(log.blockNumber);
  return (
    block >= filter.fromBlock &&
    block <= filter.toBlock &&
    filter.topics.every(
      (wanted, i) =>
        wanted === null ||
        (Array.isArray(wanted) ? wanted : [wanted]).some((t) => t.toLowerCase() === log.topics[i]?.toLowerCase()),
    )
  );
}
