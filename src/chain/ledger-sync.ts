import {
  hexToBigInt,
  hexToNumber,
  numberToHex,
  parseEventLogs,
  toEventSelector,
  type Address,
  type Hex,
  type RpcBlock,
  type RpcLog,
  type RpcTransactionReceipt,
} from 'viem';
import { DEV_ACCOUNTS } from './accounts.js';
import { rpcBatch } from './rpc.js';
import {
  isEmptyDelta,
  mergeDelta,
  type ArchivedLog,
  type ChainState,
  type StateDelta,
  type StateJournal,
} from './state.js';
import { ledgerDelta, ledgerEvents } from './token.js';

/**
 * Above this many new blocks (anvil_mine), a checkpoint asks the dev accounts' counts instead of reading every block.
 */
const MAX_BLOCKS_READ = 64n;

type Block = RpcBlock<'latest', true>;

/** What the blocks after the saved ledger hold: the token's logs, the blocks read, the dev accounts' counts. */
interface NewBlocks {
  head: bigint;
  blocks: Block[];
  logs: RpcLog[];
  counts: Record<string, number>;
}

const devAddresses = new Map(DEV_ACCOUNTS.map(({ address }) => [address.toLowerCase(), address]));
const ledgerTopics = ledgerEvents.map((event) => toEventSelector(event));

export interface LedgerSyncOptions {
  rpcUrl: string;
  journal: StateJournal;
  /** The ledger as the journal holds it, kept up to date with it. */
  state: ChainState;
  /** Everything up to this block is in the journal already. */
  syncedBlock: bigint;
  /** The token whose events make the ledger. */
  token: Address;
}

/**
 * Keeps the embedded chain's ledger in the journal. Everything up to syncedBlock is in the journal (and in `state`).
 * Each round reads the head after it starts, so it covers every transaction mined before its callers called (see
 * coalesce). The ledger change comes from the token's events; the dev accounts' transaction counts from the senders
 * and nonces of the new blocks' transactions, so no state is read.
 */
export class LedgerSync {
  private readonly rpcUrl: string;
  private readonly journal: StateJournal;
  private readonly state: ChainState;
  private syncedBlock: bigint;
  private readonly token: Address;

  constructor(options: LedgerSyncOptions) {
    this.rpcUrl = options.rpcUrl;
    this.journal = options.journal;
    this.state = options.state;
    this.syncedBlock = options.syncedBlock;
    this.token = options.token;
  }

  private isLedgerLog(log: RpcLog): boolean {
    return log.address.toLowerCase() === this.token.toLowerCase() && ledgerTopics.includes(log.topics[0] as Hex);
  }

  async sync(): Promise<void> {
    const found = await this.newBlocks();
    if (!found) return;
    const delta: StateDelta = {
      ...ledgerDelta(parseEventLogs({ abi: ledgerEvents, logs: inChainOrder(found.logs), strict: true }), this.state),
      accountNonces: {},
      height: found.head.toString(),
      logs: found.logs.map(archived),
    };
    for (const [address, count] of Object.entries(senderCounts(found))) {
      if (count > (this.state.accountNonces[address] ?? 0)) delta.accountNonces![address] = count;
    }
    if (!isEmptyDelta(delta)) {
      await this.journal.append(delta);
      mergeDelta(this.state, delta);
    }
    this.syncedBlock = found.head;
  }

  /**
   * One round trip in the usual case: the head, and the next block with its receipts (and so its logs), which is then
   * the only new one. The calls of a batch may run on either side of the mining of that block, so it is used only if
   * it came back whole; otherwise it is read again with the rest. Undefined when no block was mined.
   */
  private async newBlocks(): Promise<NewBlocks | undefined> {
    const next = this.syncedBlock + 1n;
    const [headHex, nextBlock, nextReceipts] = (await rpcBatch(this.rpcUrl, [
      { method: 'eth_blockNumber', params: [] },
      { method: 'eth_getBlockByNumber', params: [numberToHex(next), true] },
      { method: 'eth_getBlockReceipts', params: [numberToHex(next)] },
    ])) as [Hex, Block | null, RpcTransactionReceipt[] | null];
    const head = hexToBigInt(headHex);
    if (head < next) return undefined;
    const found: NewBlocks = { head, blocks: [], logs: [], counts: {} };
    let fromBlock = next;
    if (
      nextBlock &&
      nextReceipts &&
      nextReceipts.length === nextBlock.transactions.length &&
      nextReceipts.every((receipt) => receipt.blockHash === nextBlock.hash)
    ) {
      found.blocks.push(nextBlock);
      for (const receipt of nextReceipts) found.logs.push(...receipt.logs.filter((log) => this.isLedgerLog(log)));
      fromBlock = next + 1n;
    }
    if (fromBlock <= head) await this.readRange(fromBlock, found);
    return found;
  }

  /**
   * The logs from fromBlock to the head, and its blocks; after a long run of blocks (anvil_mine) the counts are asked
   * instead of reading every block. 'latest' may be past the head: a count ahead of the saved ledger is harmless
   * (counts only grow, and the next checkpoint saves what those transactions did), and it needs no old state from
   * anvil.
   */
  private async readRange(fromBlock: bigint, found: NewBlocks): Promise<void> {
    const { head } = found;
    const readBlocks = head - fromBlock < MAX_BLOCKS_READ;
    const [moreLogs, ...rest] = await rpcBatch(this.rpcUrl, [
      {
        method: 'eth_getLogs',
        params: [
          {
            address: this.token,
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
    found.logs.push(...(moreLogs as RpcLog[]));
    if (!readBlocks) {
      DEV_ACCOUNTS.forEach(({ address }, i) => (found.counts[address] = hexToNumber(rest[i] as Hex)));
      return;
    }
    for (const [i, block] of (rest as Array<Block | null>).entries()) {
      if (!block) throw new Error(`block ${fromBlock + BigInt(i)} is missing (head ${head})`);
      found.blocks.push(block);
    }
  }
}

/** The dev accounts' transaction counts: those asked, raised by the nonces they sent in the blocks read. */
function senderCounts(found: NewBlocks): Record<string, number> {
  const counts = found.counts;
  for (const block of found.blocks) {
    for (const tx of block.transactions) {
      const sender = devAddresses.get(tx.from.toLowerCase());
      if (sender) counts[sender] = Math.max(counts[sender] ?? 0, hexToNumber(tx.nonce) + 1);
    }
  }
  return counts;
}

/** In chain order (as nodes answer anyway): an Approval's value replaces the one before it. */
function inChainOrder(logs: RpcLog[]): RpcLog[] {
  const position = (log: RpcLog) => hexToBigInt(log.blockNumber!) * 1_000_000n + hexToBigInt(log.logIndex!);
  return logs.sort((a, b) => (position(a) < position(b) ? -1 : position(a) > position(b) ? 1 : 0));
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
