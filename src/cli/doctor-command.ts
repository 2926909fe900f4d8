import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Database } from '../store/index.js';
import type { Command } from './command-line.js';
import type { Config } from './config.js';
import { DataDirLock } from './data-dir-lock.js';
import { embeddedForCommand } from './database-access.js';
import { exitStatus, preflight, reportLines, type CheckResult, type PreflightDatabase } from './preflight.js';

/** Where DATABASE_URL points, without its user and password. */
function where(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || 5432}${u.pathname}`;
  } catch {
    return 'DATABASE_URL';
  }
}

const noDatabase = (message: string, fix: string): { problem: CheckResult } => ({
  problem: { check: 'postgres', status: 'fail', message, fix },
});

/**
 * The database as serve would use it, without changing it (no migration is applied): DATABASE_URL, else the
 * embedded PostgreSQL of the serve running on DATA_DIR, else that of DATA_DIR started for the command.
 */
async function openDatabase(config: Config): Promise<{ database: PreflightDatabase; close(): Promise<void> }> {
  const running = config.databaseUrl ? undefined : await DataDirLock.holder(config.dataDir);
  const url = config.databaseUrl ?? running?.database_url;
  const name = 'agent-audio doctor';
  if (url) {
    const db = new Database(url, { max: 2, name, timeoutMs: 5000 });
    // The store's own message for a lost connection is advice to agents: say what happened instead.
    const reached = await db.query('SELECT 1').then(
      () => undefined,
      (e: Error & { code?: string }) => (e.code === 'store_unavailable' ? 'no connection could be made' : e.message),
    );
    if (reached === undefined) return { database: { db }, close: () => db.close() };
    await db.close();
    return {
      database: noDatabase(
        `the PostgreSQL of ${config.databaseUrl ? 'DATABASE_URL' : 'the serve on DATA_DIR'} (${where(url)}) ` +
          `could not be used: ${reached}`,
        'check that it runs, accepts connections from this host and that the URL’s user and password are right',
      ),
      close: async () => {},
    };
  }
  if (!existsSync(join(config.dataDir, 'pg')))
    return {
      database: noDatabase(
        `no DATABASE_URL, and DATA_DIR ${config.dataDir} holds no PostgreSQL`,
        'set DATABASE_URL to the PostgreSQL (15 or later) the instances share',
      ),
      close: async () => {},
    };
  const { db, close } = await embeddedForCommand(config, { max: 2, name });
  return { database: { db }, close };
}

/** By exit status: the word --json gives and the report's last line. */
const OUTCOMES: Record<number, [string, string]> = {
  0: ['ok', 'all ok'],
  1: ['fail', 'a check failed: fix what is marked FAIL before selling'],
  3: ['warn', 'warnings only: nothing blocks a sale, but read each'],
};

export const doctorCommands: Record<string, Command> = {
  async doctor(config, args) {
    const { database, close } = await openDatabase(config);
    let results: CheckResult[];
    try {
      results = await preflight(config, database);
    } finally {
      await close();
    }
    const status = exitStatus(results);
    const [word, summary] = OUTCOMES[status];
    if (args.includes('--json'))
      process.stdout.write(`${JSON.stringify({ status: word, checks: results }, null, 2)}\n`);
    else process.stdout.write(`${reportLines(results)}\n\n${summary}\n`);
    return status;
  },
};
