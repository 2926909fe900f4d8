import type { SettledReceipts } from './settled-receipts.js';
import { createPublicClient, getAddress, http, pad, parseAbi, toEventSelector, type Address, type Hex } from 'viem';

const abi = parseAbi([
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)',
  'event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce)',
  'event Transfer(address indexed from, address indexed to, uint256 value)',
]);
const AUTHORIZATION_USED = toEventSelector(abi[1]);
const AUTHORIZATION_CANCELED = toEventSelector(abi[2]);
const TRANSFER = toEventSelector(abi[3]);

/** How old a height recentBlock() may hand out. */
const RECENT_BLOCK_MS = 1000;

/** A log of the token as eth_getLogs returns it. */
export interface TokenLog {
  address: Hex;
  topics: Hex[];
  data: Hex;
  blockNumber: Hex;
  blockHash: Hex;
  transactionHash: Hex;
  logIndex: Hex;
}

export interface LogFilter {
  fromBlock: bigint;
  toBlock: bigint;
  topics: Array<Hex | Hex[] | null>;
}

/**
 * Where logs of blocks before the live chain's first block are kept (the embedded chain restarts its node but keeps
 * its history); a remote RPC needs none.
 */
export interface LogArchive {
  /** The first block the live node has; older blocks are answered from the archive. */
  firstLiveBlock: bigint;
  logs(filter: LogFilter): TokenLog[];
}

/** The payment an order expects: this authorization moving exactly `amount` from `payer` to `payTo`. */
export interface ExpectedPayment {
  payer: string;
  nonce: string;
  payTo: string;
  amount: string;
  fromBlock: bigint;
}

/** The token's own logs that prove a payment, as an auditor can check them on any node. */
export interface TransferProof {
  transaction: Hex;
  block_number: string;
  block_hash: Hex;
  logs: Array<{ address: Hex; topics: Hex[]; data: Hex; log_index: string }>;
}

/**
 * What the chain says about an authorization. Only `paid` is a payment: `authorizationState` is also true for an
 * authorization that was cancelled or spent on another transfer.
 */
export type PaymentEvidence =
  | { kind: 'paid'; proof: TransferProof }
  | { kind: 'canceled'; transaction: Hex; block_number: string }
  | { kind: 'spent_elsewhere'; transaction?: Hex; block_number?: string }
  | { kind: 'unused' }
  /** Used, but its log is not visible yet (a node behind another): ask again later. */
  | { kind: 'not_visible_yet' };

/**
 * Reads the token contract itself: whether an EIP-3009 authorization paid what an order expects, proven by its logs.
 * This is how every order learns whether it was paid: after a settlement, after an unknown outcome, after a crash.
 * Log searches start at the block height recorded when the order was claimed and go in bounded windows, as remote
 * RPC providers refuse wide ranges.
 */
export class AuthorizationLedger {
  private readonly client;
  /** For signature checks: never retried, so that each one is one RPC call (ChainChecks budgets them). */
  private readonly checks;

  constructor(
    rpcUrl: string,
    private readonly token: Address,
    private readonly options: {
      windowBlocks?: number;
      archive?: LogArchive;
      settledReceipts?: SettledReceipts;
      /** The embedded chain's checkpoint: saves every ledger change mined so far to disk (a remote chain keeps its own). */
      save?: () => Promise<void>;
      /** An anvil chain of our own, mined on demand: a block may be made to learn that an authorization expired. */
      mineIdle?: boolean;
    } = {},
  ) {
    this.client = createPublicClient({ transport: http(rpcUrl, { timeout: 10_000, retryCount: 1 }) });
    this.checks = createPublicClient({ transport: http(rpcUrl, { timeout: 5_000, retryCount: 0 }) });
  }

  /**
   * Resolves once everything the chain has mined so far is durable: at once for a remote chain, after a checkpoint
   * for the embedded one (whose node forgets what it mined when it stops; only the saved ledger survives).
   */
  async saved(): Promise<void> {
    await this.options.save?.();
  }

  /** The chain's latest block number; throws when the RPC endpoint does not answer. */
  latestBlock(): Promise<bigint> {
    return this.client.getBlockNumber({ cacheTime: 0 });
  }

  /**
   * A height read at most a second ago (one RPC call a second however many orders ask): never above the chain's
   * latest, so a search for what becomes of a payment not settled yet may start there (an order's claim block).
   */
  recentBlock(): Promise<bigint> {
    const now = Date.now();
    if (!this.recent || now - this.recent.at > RECENT_BLOCK_MS) {
      const read = this.latestBlock();
      const entry = { at: now, read };
      read.catch(() => {
        if (this.recent === entry) this.recent = undefined;
      });
      this.recent = entry;
    }
    return this.recent.read;
  }

  private recent?: { at: number; read: Promise<bigint> };

  /** The code at an address ("0x" or undefined for a plain wallet). */
  getCode(address: Address): Promise<Hex | undefined> {
    return this.checks.getCode({ address });
  }

  /** eth_call with a gas cap: its return data, or undefined for none. */
  async call(request: { to?: Address; data: Hex; gas: bigint }): Promise<Hex | undefined> {
    return (await this.checks.call(request)).data;
  }

  isUsed(authorizer: string, nonce: string): Promise<boolean> {
    return this.client.readContract({
      address: this.token,
      abi,
      functionName: 'authorizationState',
      args: [authorizer as Address, nonce as Hex],
    });
  }

  /**
   * True only when the chain shows that this authorization was not used and never can be: unused at a block whose
   * timestamp is at or past validBefore (the token refuses it in any block from then on, and later blocks never carry
   * an earlier time). A node that lags shows an older block and answers false: the order waits instead.
   */
  async expiredUnused(authorizer: string, nonce: string, validBefore: string): Promise<boolean> {
    const expiry = BigInt(validBefore);
    let block = await this.client.getBlock({ blockTag: 'latest' });
    if (block.timestamp < expiry && this.options.mineIdle && BigInt(Math.floor(Date.now() / 1000)) >= expiry) {
      // The embedded chain mines only when a transaction comes: an idle one shows an old time until a block is made.
      await this.client.request({ method: 'evm_mine' } as never);
      block = await this.client.getBlock({ blockTag: 'latest' });
    }
    if (block.timestamp < expiry) return false;
    const used = await this.client.readContract({
      address: this.token,
      abi,
      functionName: 'authorizationState',
      args: [authorizer as Address, nonce as Hex],
      blockNumber: block.number,
    });
    return !used;
  }

  /**
   * The evidence of a transaction that claims to have settled this payment (the facilitator's answer): its receipt,
   * as the in-process facilitator received it from the same node when it has one, else asked from the node.
   */
  async evidenceOfTransaction(transaction: string, expected: ExpectedPayment): Promise<PaymentEvidence | undefined> {
    const receipt =
      this.options.settledReceipts?.take(transaction) ??
      (await this.client.getTransactionReceipt({ hash: transaction as Hex }).catch(() => undefined));
    if (!receipt || receipt.status !== 'success') return undefined;
    const logs: TokenLog[] = receipt.logs.map((l) => ({
      address: l.address,
      topics: l.topics as Hex[],
      data: l.data,
      blockNumber: `0x${l.blockNumber.toString(16)}`,
      blockHash: l.blockHash,
      transactionHash: l.transactionHash,
      logIndex: `0x${l.logIndex.toString(16)}`,
    }));
    const used = logs.find((l) => this.isAuthorizationLog(l, AUTHORIZATION_USED, expected));
    return used ? this.judge(used, logs, expected) : undefined;
  }

  /** Searches the chain for what became of the authorization since `expected.fromBlock`. */
  async evidence(expected: ExpectedPayment): Promise<PaymentEvidence> {
    const [used, latest] = await Promise.all([this.isUsed(expected.payer, expected.nonce), this.latestBlock()]);
    if (!used) return { kind: 'unused' };
    const topics = [
      [AUTHORIZATION_USED, AUTHORIZATION_CANCELED],
      pad(getAddress(expected.payer)),
      expected.nonce as Hex,
    ];
    const window = BigInt(this.options.windowBlocks ?? 2000);
    for (let from = expected.fromBlock; from <= latest; from += window) {
      const to = from + window - 1n < latest ? from + window - 1n : latest;
      const [found] = await this.logs({ fromBlock: from, toBlock: to, topics });
      if (!found) continue;
      if (found.topics[0] === AUTHORIZATION_CANCELED)
        return {
          kind: 'canceled',
          transaction: found.transactionHash,
          block_number: BigInt(found.blockNumber).toString(),
        };
      const block = BigInt(found.blockNumber);
      const transfers = await this.logs({ fromBlock: block, toBlock: block, topics: [TRANSFER] });
      return this.judge(
        found,
        transfers.filter((l) => l.transactionHash === found.transactionHash),
        expected,
      );
    }
    return { kind: 'not_visible_yet' };
  }

  /** Paid only when the same transaction moved exactly the expected amount from the payer to the seller. */
  private judge(used: TokenLog, transactionLogs: TokenLog[], expected: ExpectedPayment): PaymentEvidence {
    const transfer = transactionLogs.find(
      (l) =>
        l.address.toLowerCase() === this.token.toLowerCase() &&
        l.topics[0] === TRANSFER &&
        l.topics[1]?.toLowerCase() === pad(getAddress(expected.payer)).toLowerCase() &&
        l.topics[2]?.toLowerCase() === pad(getAddress(expected.payTo)).toLowerCase() &&
        BigInt(l.data) === BigInt(expected.amount),
    );
    const block_number = BigInt(used.blockNumber).toString();
    if (!transfer) return { kind: 'spent_elsewhere', transaction: used.transactionHash, block_number };
    const entry = (l: TokenLog) => ({
      address: l.address,
      topics: l.topics,
      data: l.data,
      log_index: BigInt(l.logIndex).toString(),
    });
    return {
      kind: 'paid',
      proof: {
        transaction: used.transactionHash,
        block_number,
        block_hash: used.blockHash,
        logs: [entry(used), entry(transfer)],
      },
    };
  }

  private isAuthorizationLog(log: TokenLog, topic: Hex, expected: ExpectedPayment): boolean {
    return (
      log.address.toLowerCase() === this.token.toLowerCase() &&
      log.topics[0] === topic &&
      log.topics[1]?.toLowerCase() === pad(getAddress(expected.payer)).toLowerCase() &&
      log.topics[2]?.toLowerCase() === expected.nonce.toLowerCase()
    );
  }

  /** The token's logs in a range: blocks before the live node's first block from the archive, the rest from the node. */
  private async logs(filter: LogFilter): Promise<TokenLog[]> {
    const archive = this.options.archive;
    const archived =
      archive && filter.fromBlock < archive.firstLiveBlock
        ? archive.logs({
            ...filter,
            toBlock: filter.toBlock < archive.firstLiveBlock ? filter.toBlock : archive.firstLiveBlock - 1n,
          })
        : [];
    const liveFrom = archive && filter.fromBlock < archive.firstLiveBlock ? archive.firstLiveBlock : filter.fromBlock;
    if (liveFrom > filter.toBlock) return archived;
    const live = (await this.client.request({
      method: 'eth_getLogs',
      params: [
        {
          address: this.token,
          topics: filter.topics,
          fromBlock: `0x${liveFrom.toString(16)}`,
          toBlock: `0x${filter.toBlock.toString(16)}`,
        },
      ],
    })) as unknown as TokenLog[];
    return [...archived, ...live];
  }
}
