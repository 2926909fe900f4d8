import { constants, write } from 'node:fs';
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

/** Appends, each write on disk before it returns (O_DSYNC: the data and what is needed to read it back). */
const APPEND_DURABLY = constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND | constants.O_DSYNC;

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
    return { journal: new StateJournal(path, await open(path, APPEND_DURABLY)), state };
  }

  /**
   * Appends a line; resolves once it is on disk. The file is open with O_DSYNC, so one write is a write and an
   * fdatasync, and costs one trip to the thread pool (through the fd: FileHandle's promises cost more CPU per call).
   */
  append(delta: StateDelta): Promise<void> {
    const line = `${JSON.stringify(delta)}\n`;
    return new Promise((resolve, reject) =>
      write(this.handle.fd, line, null, 'utf8', (error, written) => {
        if (error) reject(error);
        else if (written !== Buffer.byteLength(line))
          reject(new Error(`${this.path}: ${written} bytes of a line written`));
        else resolve();
      }),
    );
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
