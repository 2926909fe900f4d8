import { join } from 'node:path';
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  hexToBigInt,
  hexToNumber,
  http,
  numberToHex,
  parseEventLogs,
  toEventSelector,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
  type RpcBlock,
  type RpcLog,
  type RpcTransactionReceipt,
  type Transport,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { createNonceManager, jsonRpc } from 'viem/nonce';
import { DEV_ACCOUNTS, DEV_ROLES, type DevAccounts } from './accounts.js';
import { startAnvil } from './anvil.js';
import { coalesce } from './coalesce.js';
import { loadArtifacts } from './contracts.js';
import { writeAnvilGenesis } from './genesis.js';
import { rpcBatch } from './rpc.js';
import { isEmptyDelta, mergeDelta, StateJournal, type ArchivedLog, type StateDelta } from './state.js';
import { ledgerDelta, ledgerEvents, MULTICALL3_ADDRESS, tokenAbi, USDC_ADDRESS } from './token.js';

export const EMBEDDED_CHAIN_ID = 8453;

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

/** Above this many new blocks (anvil_mine), a checkpoint asks the dev accounts' counts instead of reading every block. */
const MAX_BLOCKS_READ = 64n;

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
  /** The first block of this run of the node: earlier blocks are gone from it, their token logs are in `archivedLogs`. */
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
  const { dataDir, host = '127.0.0.1', port = 0, checkpointIntervalMs = 1000 } = options;
  const { journal, state } = await StateJournal.open(join(dataDir, 'chain-state.jsonl'));
  const genesisFile = join(dataDir, 'anvil-genesis.json');
  await writeAnvilGenesis(genesisFile, state, loadArtifacts());
  // Block numbers go on from the last saved block, so heights recorded before a restart still mean the same block.
  const firstLiveBlock = BigInt(state.height) === 0n ? 0n : BigInt(state.height) + 1n;
  const history = state.logs.filter((log) => BigInt(log.blockNumber) < firstLiveBlock);

  let anvil;
  try {
    anvil = await startAnvil({
      host,
      port,
      chainId: EMBEDDED_CHAIN_ID,
      loadStateFile: genesisFile,
      extraArgs: [
        ...(options.anvilArgs ?? EMBEDDED_ANVIL_ARGS),
        ...(firstLiveBlock > 0n ? ['--number', String(firstLiveBlock)] : []),
      ],
      onUnexpectedExit: options.onUnexpectedExit,
    });
  } catch (error) {
    await journal.close();
    throw error;
  }
  const viemChain = localViemChain(EMBEDDED_CHAIN_ID, anvil.rpcUrl);
  const publicClient: PublicClient = createPublicClient<Transport, Chain>({
    chain: viemChain,
    transport: http(anvil.rpcUrl),
    pollingInterval: 10,
  });
  const minter = createWalletClient({
    account: privateKeyToAccount(DEV_ROLES.minter.privateKey, {
      nonceManager: createNonceManager({ source: jsonRpc() }),
    }),
    chain: viemChain,
    transport: http(anvil.rpcUrl),
    pollingInterval: 10,
  });

  const devAddresses = new Map(DEV_ACCOUNTS.map(({ address }) => [address.toLowerCase(), address]));
  const ledgerTopics = ledgerEvents.map((event) => toEventSelector(event));
  const isLedgerLog = (log: RpcLog) =>
    log.address.toLowerCase() === USDC_ADDRESS.toLowerCase() && ledgerTopics.includes(log.topics[0] as Hex);

  // Everything up to syncedBlock is in the journal (and in `state`). Each round reads the head after it
  // starts, so it covers every transaction mined before its callers called (see coalesce). The ledger
  // change comes from the token's events; the dev accounts' transaction counts from the senders and
  // nonces of the new blocks' transactions, so no state is read.
  let syncedBlock = firstLiveBlock;
  const syncLedger = async (): Promise<void> => {
    const next = syncedBlock + 1n;
    // One round trip in the usual case: the head, and the next block with its receipts (and so its logs),
    // which is then the only new one. The calls of a batch may run on either side of the mining of that
    // block, so it is used only if it came back whole; otherwise it is read again below.
    const [headHex, nextBlock, nextReceipts] = (await rpcBatch(anvil.rpcUrl, [
      { method: 'eth_blockNumber', params: [] },
      { method: 'eth_getBlockByNumber', params: [numberToHex(next), true] },
      { method: 'eth_getBlockReceipts', params: [numberToHex(next)] },
    ])) as [Hex, RpcBlock<'latest', true> | null, RpcTransactionReceipt[] | null];
    const head = hexToBigInt(headHex);
    if (head < next) return;
    const blocks: Array<RpcBlock<'latest', true>> = [];
    const logs: RpcLog[] = [];
    let fromBlock = next;
    if (
      nextBlock &&
      nextReceipts &&
      nextReceipts.length === nextBlock.transactions.length &&
      nextReceipts.every((receipt) => receipt.blockHash === nextBlock.hash)
    ) {
      blocks.push(nextBlock);
      for (const receipt of nextReceipts) logs.push(...receipt.logs.filter(isLedgerLog));
      fromBlock = next + 1n;
    }
    const counts: Record<string, number> = {};
    if (fromBlock <= head) {
      // After a long run of blocks (anvil_mine) the counts are asked instead of reading every block. 'latest'
      // may be past the head: a count ahead of the saved ledger is harmless (counts only grow, and the next
      // checkpoint saves what those transactions did), and it needs no old state from anvil.
      const readBlocks = head - fromBlock < MAX_BLOCKS_READ;
      const [moreLogs, ...rest] = await rpcBatch(anvil.rpcUrl, [
        {
          method: 'eth_getLogs',
          params: [
            {
              address: USDC_ADDRESS,
              topics: [ledgerTopics],
              fromBlock: numberToHex(fromBlock),
              toBlock: numberToHex(head),
            },
          ],
        },
        ...(readBlocks
          ? Array.from({ length: Number(head - fromBlock) + 1 }, (_, i) => ({
              method: 'eth_getBlockByNumber',
              params: [numberToHex(fromBlock + BigInt(i)), true],
            }))
          : DEV_ACCOUNTS.map(({ address }) => ({ method: 'eth_getTransactionCount', params: [address, 'latest'] }))),
      ]);
      logs.push(...(moreLogs as RpcLog[]));
      if (readBlocks) {
        for (const [i, block] of (rest as Array<RpcBlock<'latest', true> | null>).entries()) {
          if (!block) throw new Error(`block ${fromBlock + BigInt(i)} is missing (head ${head})`);
          blocks.push(block);
        }
      } else {
        DEV_ACCOUNTS.forEach(({ address }, i) => (counts[address] = hexToNumber(rest[i] as Hex)));
      }
    }
    for (const block of blocks) {
      for (const tx of block.transactions) {
        const sender = devAddresses.get(tx.from.toLowerCase());
        if (sender) counts[sender] = Math.max(counts[sender] ?? 0, hexToNumber(tx.nonce) + 1);
      }
    }
    // In chain order (as nodes answer anyway): an Approval's value replaces the one before it.
    const position = (log: RpcLog) => hexToBigInt(log.blockNumber!) * 1_000_000n + hexToBigInt(log.logIndex!);
    logs.sort((a, b) => (position(a) < position(b) ? -1 : position(a) > position(b) ? 1 : 0));
    const events = parseEventLogs({ abi: ledgerEvents, logs, strict: true });
    const delta: StateDelta = {
      ...ledgerDelta(events, state),
      accountNonces: {},
      height: head.toString(),
      logs: logs.map(archived),
    };
    for (const [address, count] of Object.entries(counts)) {
      if (count > (state.accountNonces[address] ?? 0)) delta.accountNonces![address] = count;
    }
    if (!isEmptyDelta(delta)) {
      await journal.append(delta);
      mergeDelta(state, delta);
    }
    syncedBlock = head;
  };
  const checkpoint = coalesce(syncLedger);
  const timer = setInterval(() => checkpoint().catch(() => undefined), checkpointIntervalMs);
  timer.unref();

  const usdcBalance = (address: Address) =>
    publicClient.readContract({ address: USDC_ADDRESS, abi: tokenAbi, functionName: 'balanceOf', args: [address] });

  const mintUsdc = async (to: Address, atomic: bigint): Promise<Hex> => {
    const hash = await minter.writeContract({
      address: USDC_ADDRESS,
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
    archivedLogs: (filter) =>
      history.filter((log) => {
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
      }),
    stop,
  };
}

function archived(log: RpcLog): ArchivedLog {
  return {
    address: log.address,
    topics: log.topics,
    data: log.data,
    blockNumber: log.blockNumber!,
    blockHash: log.blockHash!,
    transactionHash: log.transactionHash!,
    logIndex: log.logIndex!,
  };
}
