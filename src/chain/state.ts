import { mkdir, open, readFile, rename, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * What survives a restart of the embedded chain: the token's ledger, the used or canceled
 * EIP-3009 nonces and the dev accounts' transaction counts. Amounts are atomic units as decimal strings.
 */
export interface ChainState {
  totalSupply: string;
  balances: Record<string, string>;
  allowances: Record<string, Record<string, string>>;
  /** authorizer -> nonces that are used or canceled */
  authorizations: Record<string, string[]>;
  accountNonces: Record<string, number>;
  /** The last block whose effects are saved here: a restarted node continues after it. */
  height: string;
  /** The token's logs of every saved block (the chain's history, which a restarted node no longer has). */
  logs: ArchivedLog[];
}

/** A token log as eth_getLogs returns it. */
export interface ArchivedLog {
  address: string;
  topics: string[];
  data: string;
  blockNumber: string;
  blockHash: string;
  transactionHash: string;
  logIndex: string;
}

/** A change to merge: maps overwrite per key, `authorizations` and `logs` are appended. */
export type StateDelta = Partial<ChainState>;

export function emptyState(): ChainState {
  return {
    totalSupply: '0',
    balances: {},
    allowances: {},
    authorizations: {},
    accountNonces: {},
    height: '0',
    logs: [],
  };
}

export function isEmptyDelta(delta: StateDelta): boolean {
  const maps = [delta.balances, delta.allowances, delta.authorizations, delta.accountNonces];
  return (
    delta.totalSupply === undefined &&
    delta.height === undefined &&
    !delta.logs?.length &&
    maps.every((map) => map === undefined || Object.keys(map).length === 0)
  );
}

export function mergeDelta(state: ChainState, delta: StateDelta): ChainState {
  if (delta.totalSupply !== undefined) state.totalSupply = delta.totalSupply;
  if (delta.height !== undefined) state.height = delta.height;
  if (delta.logs) state.logs.push(...delta.logs);
  Object.assign(state.balances, delta.balances);
  Object.assign(state.accountNonces, delta.accountNonces);
  for (const [owner, spenders] of Object.entries(delta.allowances ?? {})) {
    state.allowances[owner] = { ...state.allowances[owner], ...spenders };
  }
  for (const [authorizer, nonces] of Object.entries(delta.authorizations ?? {})) {
    (state.authorizations[authorizer] ??= []).push(...nonces);
  }
  return state;
}

/**
 * An append-only JSON-lines journal: the first line is a full state, each later line a delta.
 * open() folds the journal and rewrites it as one line (atomically), so it stays small across restarts.
 */
export class StateJournal {
  private constructor(
    readonly path: string,
    private handle: FileHandle,
  ) {}

  static async open(path: string): Promise<{ journal: StateJournal; state: ChainState }> {
    await mkdir(dirname(path), { recursive: true });
    const state = await readJournal(path);
    const tmp = `${path}.tmp`;
    const compacted = await open(tmp, 'w');
    await compacted.writeFile(`${JSON.stringify(state)}\n`);
    await compacted.sync();
    await compacted.close();
    await rename(tmp, path);
    return { journal: new StateJournal(path, await open(path, 'a')), state };
  }

  async append(delta: StateDelta): Promise<void> {
    await this.handle.write(`${JSON.stringify(delta)}\n`);
    await this.handle.datasync();
  }

  async close(): Promise<void> {
    await this.handle.close();
  }
}

async function readJournal(path: string): Promise<ChainState> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return emptyState();
    throw error;
  }
  const state = emptyState();
  const lines = text.split('\n').filter((line) => line.trim() !== '');
  lines.forEach((line, index) => {
    try {
      mergeDelta(state, JSON.parse(line) as StateDelta);
    } catch (error) {
      // A torn last line is what a crash mid-append leaves behind; anything else is corruption.
      if (index !== lines.length - 1)
        throw new Error(`corrupt chain state journal ${path} line ${index + 1}: ${error}`);
    }
  });
  return state;
}
