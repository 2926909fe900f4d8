import { createPublicKey, type KeyObject } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
// The chain's own modules, not the audit index: list, show, verify and head start without the pricing and rules
// modules that replaying needs (the commands that replay load the index when they run).
import { AuditLog } from '../audit/audit-log.js';
import type { ChainProblem } from '../audit/chain-problem.js';
import { signCurrentHead } from '../audit/head-publisher.js';
import { loadSigningKey, type SignedCheckpoint, type SignedHead } from '../audit/signing.js';
import {
  dateOption,
  option,
  options,
  print,
  usageError,
  withDatabase,
  type Command,
  type CommandDatabase,
} from './command-line.js';
import { signingKeyOptions, type Config } from './config.js';
import { helpFor } from './help.js';
import { progressReporter } from './progress.js';
import { refundReceipts } from './refund-receipts.js';

/** The operator's public key: --public-key FILE, else the one of the signing key configured here. */
async function operatorPublicKey(config: Config, args: string[]): Promise<KeyObject | undefined> {
  const file = option(args, '--public-key');
  if (file) return createPublicKey(await readFile(file, 'utf8'));
  return (await loadSigningKey(signingKeyOptions(config, false)))?.publicKey;
}

/** How many records audit replay --all will replay (for its progress lines). */
async function countEvaluations(db: CommandDatabase, kinds: readonly string[]): Promise<number> {
  const [row] = await db.query<{ n: string }>('SELECT count(*) AS n FROM audit_records WHERE kind = ANY($1)', [
    [...kinds],
  ]);
  return Number(row.n);
}

/** A head file as an auditor kept it: the signed head itself, or the whole GET /audit/head answer. */
function keptHead(
  kept: { signed_head?: SignedHead | SignedCheckpoint } & Partial<SignedHead | SignedCheckpoint>,
): SignedHead | SignedCheckpoint {
  return (kept?.signed_head ?? kept) as SignedHead | SignedCheckpoint;
}

/** Failed orders the token shows charged, where an RPC is configured (X402_RPC_URL); a note when it cannot tell. */
async function failedOnChain(config: Config, db: CommandDatabase, notes: string[]): Promise<ChainProblem[]> {
  const { rpcUrl, asset } = config.payments;
  if (!rpcUrl || !asset) return [];
  const { chargedFailedOrders } = await import('./failed-orders-on-chain.js');
  try {
    return (await chargedFailedOrders(db, { rpcUrl, asset })).problems;
  } catch (e) {
    notes.push(`failed orders not looked up on chain (X402_RPC_URL): ${(e as Error).message.split('\n')[0]}`);
    return [];
  }
}

export const auditCommands: Record<string, Command> = {
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
    const { EVALUATION_KINDS, Replayer } = await import('../audit/index.js');
    return withDatabase(config, async (db) => {
      const log = new AuditLog(db);
      const replayer = new Replayer(log);
      let failures = 0;
      let count = 0;
      const all = target === '--all';
      const progress = progressReporter(args);
      const total = all && progress.enabled ? await countEvaluations(db, EVALUATION_KINDS) : 1;
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
    const { checked, problems, notes } = await withDatabase(config, async (db) => {
      const verified = await new AuditLog(db).verify({
        operatorKey,
        heads,
        provisionBoundMs: config.refunds.provisionTimeoutMs,
      });
      return { ...verified, problems: [...verified.problems, ...(await failedOnChain(config, db, verified.notes))] };
    });
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
    const { exportBundle } = await import('../audit/index.js');
    const receiptOf = signer && (await refundReceipts(signer, config.payments.network));
    const bundle = await withDatabase(config, (db) => exportBundle(db, new AuditLog(db), selection, signer, receiptOf));
    const text = `${JSON.stringify(bundle, null, 2)}\n`;
    const out = option(args, '--out');
    if (out) {
      await writeFile(out, text);
      print(
        `${bundle.records.length} records, ${Object.keys(bundle.snapshots).length} snapshots, chain to ` +
          `signed head seq ${bundle.signed_head.head.seq}: written to ${out}`,
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
    const { verifyBundle } = await import('../audit/index.js');
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
