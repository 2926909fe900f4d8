#!/usr/bin/env node
import { createPublicKey, type KeyObject } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { userInfo } from 'node:os';
import {
  AuditLog,
  EVALUATION_KINDS,
  exportBundle,
  loadSigningKey,
  Replayer,
  signCurrentHead,
  verifyBundle,
  type SignedCheckpoint,
  type SignedHead,
} from '../audit/index.js';
import { formatDiagnostic } from '../catalog/index.js';
import { ApiKeys } from '../keys/index.js';
import { jsonLogger } from '../log/index.js';
import { catalogCommands } from './catalog-commands.js';
import { hostCommands } from './host-commands.js';
import { configFromEnv, SERVE_ROLES, signingKeyOptions, type Config, type ServeRole } from './config.js';
import { openDatabase, withDatabase } from './database-access.js';
import { helpFor, helpRequest, isGroup, usage } from './help.js';
import { progressReporter } from './progress.js';
import { readySummary } from './ready-summary.js';
import { RefundStore } from '../refunds/index.js';
import { stopRequested } from './stop-signals.js';

type Command = (config: Config, args: string[]) => Promise<number>;

const print = (value: unknown) =>
  process.stdout.write(`${typeof value === 'string' ? value : JSON.stringify(value, null, 2)}\n`);

function option(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

function options(args: string[], name: string): string[] {
  return args.flatMap((a, i) => (a === name && args[i + 1] !== undefined ? [args[i + 1]] : []));
}

/** A time option; null (after saying why) when it is not a date. */
function dateOption(args: string[], name: string): Date | undefined | null {
  const text = option(args, name);
  if (text === undefined) return undefined;
  const date = new Date(text);
  if (Number.isNaN(date.getTime())) {
    process.stderr.write(`${name} needs a date such as 2026-11-23 or 2026-11-23T15:00:00Z, got ${text}\n`);
    return null;
  }
  return date;
}

/** The operator's public key: --public-key FILE, else the one of the signing key configured here. */
async function operatorPublicKey(config: Config, args: string[]): Promise<KeyObject | undefined> {
  const file = option(args, '--public-key');
  if (file) return createPublicKey(await readFile(file, 'utf8'));
  return (await loadSigningKey(signingKeyOptions(config, false)))?.publicKey;
}

/** How many records audit replay --all will replay (for its progress lines). */
async function countEvaluations(db: Awaited<ReturnType<typeof openDatabase>>['db']): Promise<number> {
  const [row] = await db.query<{ n: string }>('SELECT count(*) AS n FROM audit_records WHERE kind = ANY($1)', [
    [...EVALUATION_KINDS],
  ]);
  return Number(row.n);
}

const commands: Record<string, Command> = {
  ...catalogCommands,
  ...hostCommands,
  async serve(settings, args) {
    const role = option(args, '--role') ?? 'all';
    if (!(SERVE_ROLES as readonly string[]).includes(role)) {
      return usageError(`--role must be one of ${SERVE_ROLES.join(', ')}, got ${role}`, helpFor('serve'));
    }
    const config = { ...settings, role: role as ServeRole };
    const began = performance.now();
    const logOptions = config.log;
    const log = jsonLogger({ service: 'agent-audio-api' }, logOptions);
    const stop = stopRequested((signal) => {
      log.warn({ signal }, 'second stop signal: exiting now (PostgreSQL is told to shut down fast)');
      process.exit(130);
    });
    // @x402/evm leaves a rejected promise unawaited when the chain is unreachable (its asset cache); a server must not die of it.
    process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled promise rejection'));
    // Loaded here only: the other commands (audit, keys, catalog…) start without the service's modules, in a
    // fraction of the time.
    const { serve } = await import('./serve.js');
    const service = await serve(config, log);
    const summary = readySummary(config, service, (performance.now() - began) / 1000);
    if (logOptions.format === 'pretty') print(summary.lines.join('\n'));
    else {
      print(summary.lines.slice(0, 2).join('\n'));
      log.info(summary.fields, 'ready');
    }
    const { signal, at } = await stop;
    log.info({ signal }, 'stopping');
    await service.stop();
    const seconds = ((performance.now() - at) / 1000).toFixed(1);
    if (logOptions.format === 'json') log.info({ signal, seconds }, 'stopped');
    print(`stopped (${signal}) in ${seconds} s`);
    return 0;
  },

  async 'keys create'(config, args) {
    const name = option(args, '--name');
    if (!name) {
      process.stderr.write('keys create needs --name NAME\n');
      return 2;
    }
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
    if (!id) {
      process.stderr.write('keys revoke needs ID\n');
      return 2;
    }
    const revoked = await withDatabase(config, (db) => new ApiKeys(db).revoke(id));
    print(revoked ? `revoked ${id}` : `no active key ${id}`);
    return revoked ? 0 : 1;
  },

  async 'refunds list'(config, args) {
    const rows = await withDatabase(config, (db) => new RefundStore(db).list(Number(option(args, '--limit') ?? 100)));
    print(
      rows.map((r) => ({
        id: r.id,
        status: r.status,
        reason: r.reason,
        part_of: r.part_of,
        amount_atomic: r.amount_atomic,
        to: r.payer,
        service_id: r.service_id,
        order_ids: r.order_ids,
        waits_for_operator: r.status === 'pending' && r.needs_approval && !r.approved_at,
        pending_reason: r.pending_reason,
        transaction: r.transaction,
        created_at: r.created_at.toISOString(),
        sent_at: r.sent_at?.toISOString() ?? null,
      })),
    );
    return 0;
  },

  async 'refunds approve'(config, args) {
    const id = args.find((a) => !a.startsWith('--'));
    if (!id) {
      process.stderr.write('refunds approve needs ID\n');
      return 2;
    }
    const approved = await withDatabase(config, (db) =>
      new RefundStore(db).approve(id, userInfo().username || 'operator'),
    );
    const sent = approved.map((r) => `${r.amount_atomic} atomic USDC to ${r.payer}`).join(', ');
    print(
      approved.length
        ? `approved ${id}: ${sent}; the refund worker sends it on its next pass`
        : `no refund ${id} waiting for approval (refunds list shows them)`,
    );
    return approved.length ? 0 : 1;
  },

  async 'audit list'(config, args) {
    const limit = Number(option(args, '--limit') ?? 20);
    const since = dateOption(args, '--since');
    const until = dateOption(args, '--until');
    if (since === null || until === null) return 2;
    const filter = {
      limit,
      kind: option(args, '--kind'),
      productId: option(args, '--product'),
      apiKeyId: option(args, '--key'),
      since,
      until,
    };
    const rows = await withDatabase(config, (db) => new AuditLog(db).list(filter));
    print(
      rows.map((r) => ({
        seq: r.seq,
        id: r.id,
        kind: r.kind,
        subject: r.subject ?? undefined,
        created_at: r.created_at_text,
        snapshot_hash: r.snapshot_hash,
        chain_hash: r.chain_hash,
      })),
    );
    return 0;
  },

  async 'audit show'(config, args) {
    const found = await withDatabase(config, (db) => new AuditLog(db).lookup(args[0] ?? ''));
    if (!found) {
      process.stderr.write(`no record, quote, order or service ${args[0]}\n`);
      return 1;
    }
    const shown = found.records.map((row) => ({
      ...row,
      created_at: row.created_at_text,
      created_at_text: undefined,
      record: JSON.parse(row.record),
    }));
    print(
      found.records.length === 1 && found.about.startsWith('record')
        ? shown[0]
        : { about: found.about, records: shown },
    );
    return 0;
  },

  async 'audit replay'(config, args) {
    const target = args.find((a) => a === '--all' || !a.startsWith('--'));
    if (!target) return usageError('audit replay needs ID or --all', helpFor('audit replay'));
    return withDatabase(config, async (db) => {
      const log = new AuditLog(db);
      const replayer = new Replayer(log);
      let failures = 0;
      let count = 0;
      const all = target === '--all';
      const progress = progressReporter(args);
      const total = all && progress.enabled ? await countEvaluations(db) : 1;
      const ids = all ? log.all() : [{ id: target, kind: undefined }];
      for await (const { id, kind } of ids) {
        if (kind && !(EVALUATION_KINDS as readonly string[]).includes(kind)) continue;
        const report = await replayer.replay(id);
        count++;
        if (!report.identical) failures++;
        print(JSON.stringify(report));
        progress.report(`replayed ${count}/${total}`, count === total);
      }
      print(`${count} replayed, ${count - failures} identical, ${failures} different`);
      return failures ? 1 : 0;
    });
  },

  async 'audit verify'(config, args) {
    const operatorKey = await operatorPublicKey(config, args);
    const heads = await Promise.all(
      options(args, '--head').map(async (file) => keptHead(JSON.parse(await readFile(file, 'utf8')))),
    );
    const { checked, problems, notes } = await withDatabase(config, (db) =>
      new AuditLog(db).verify({ operatorKey, heads, provisionBoundMs: config.refunds.provisionTimeoutMs }),
    );
    for (const p of problems) process.stderr.write(`seq ${p.seq}${p.id ? ` (${p.id})` : ''}: ${p.problem}\n`);
    for (const n of notes) process.stderr.write(`note: ${n}\n`);
    const broken = problems.filter((p) => !p.undelivered).length;
    const limbo = problems.length - broken;
    const through = heads.length ? ` and passes through the ${heads.length} signed heads given` : '';
    const chain = broken ? `the chain is BROKEN (${broken} problems)` : `the chain is intact${through}`;
    const unpaidBack = limbo ? `; ${limbo} paid orders neither provisioned nor refunded within the bound` : '';
    print(`${checked} records checked: ${chain}${unpaidBack}`);
    return problems.length ? 1 : 0;
  },

  async 'audit head'(config) {
    const signer = await loadSigningKey(signingKeyOptions(config, false));
    if (!signer) {
      process.stderr.write(
        'no operator signing key here (AUDIT_SIGNING_KEY, AUDIT_SIGNING_KEY_FILE, or DATA_DIR/audit-signing-key.pem)\n',
      );
      return 1;
    }
    print(await withDatabase(config, (db) => signCurrentHead(db, signer)));
    return 0;
  },

  async 'audit export'(config, args) {
    const since = dateOption(args, '--since');
    const until = dateOption(args, '--until');
    if (since === null || until === null) return 2;
    const selection = { order: option(args, '--order'), quote: option(args, '--quote'), since, until };
    if (!selection.order && !selection.quote && !since && !until) {
      process.stderr.write('audit export needs --order ID, --quote ID or --since/--until\n');
      return 2;
    }
    const signer = await loadSigningKey(signingKeyOptions(config, false));
    const bundle = await withDatabase(config, (db) => exportBundle(db, new AuditLog(db), selection, signer));
    const text = `${JSON.stringify(bundle, null, 2)}\n`;
    const out = option(args, '--out');
    if (out) {
      await writeFile(out, text);
      print(
        `${bundle.records.length} records, ${Object.keys(bundle.snapshots).length} snapshots, chain to signed head seq ${bundle.signed_head.head.seq}: written to ${out}`,
      );
    } else {
      process.stdout.write(text);
    }
    return 0;
  },

  async 'audit verify-bundle'(_config, args) {
    const file = args.find((a, i) => !a.startsWith('--') && args[i - 1] !== '--public-key');
    if (!file) {
      process.stderr.write('audit verify-bundle needs FILE\n');
      return 2;
    }
    const keyFile = option(args, '--public-key');
    const trusted = keyFile ? createPublicKey(await readFile(keyFile, 'utf8')) : undefined;
    const verdict = await verifyBundle(JSON.parse(await readFile(file, 'utf8')), trusted);
    for (const f of verdict.facts) print(`  ${f}`);
    for (const p of verdict.problems) process.stderr.write(`DIFFERENCE ${p}\n`);
    print(
      verdict.ok
        ? `VERIFIED: ${file} is intact, chained to its signed head, and every evaluation replays byte for byte`
        : `NOT VERIFIED: ${file} has ${verdict.problems.length} problems (above)`,
    );
    return verdict.ok ? 0 : 1;
  },
};

/** Usage errors (an unknown command, a missing subcommand) exit with 2 after saying what was wrong, then the usage. */
/** A head file as an auditor kept it: the signed head itself, or the whole GET /audit/head answer. */
function keptHead(
  kept: { signed_head?: SignedHead | SignedCheckpoint } & Partial<SignedHead | SignedCheckpoint>,
): SignedHead | SignedCheckpoint {
  return (kept?.signed_head ?? kept) as SignedHead | SignedCheckpoint;
}

function usageError(problem: string, help = usage): number {
  process.stderr.write(`${problem}\n\n${help}\n`);
  return 2;
}

/** The first --flag that the command's help does not name (the help is the list of what it takes). */
function unknownOption(name: string, args: string[]): string | undefined {
  const known = new Set(helpFor(name)?.match(/--[a-z][a-z-]*/g) ?? []);
  return args.find((a) => /^--[a-z]/.test(a) && !known.has(a));
}

async function main(argv: string[]): Promise<number> {
  const help = helpRequest(argv);
  if (help !== undefined) {
    print(help);
    return 0;
  }
  if (argv.length === 0) return usageError('agent-audio needs a command');
  if (argv[0] === 'help') return usageError(`unknown command ${argv.slice(1).join(' ')}`);
  const two = argv.slice(0, 2).join(' ');
  const [name, args] = Object.hasOwn(commands, two) ? [two, argv.slice(2)] : [argv[0], argv.slice(1)];
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (isGroup(argv[0]) && argv.length === 1) return usageError(`${argv[0]} needs a subcommand`, helpFor(argv[0]));
  if (!command) return usageError(`unknown command ${isGroup(argv[0]) ? two : argv[0]}`);
  // A command without its own help text (helpRequest did not know it) shows the overview.
  if (args.includes('--help') || args.includes('-h')) {
    print(usage);
    return 0;
  }
  const unknown = unknownOption(name, args);
  if (unknown) return usageError(`unknown option ${unknown} for ${name}`, helpFor(name));
  return command(configFromEnv(), args);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`error: ${(e as Error).message}\n`);
    process.exit(1);
  },
);
