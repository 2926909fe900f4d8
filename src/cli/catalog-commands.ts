import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { formatDiagnostic, formatDiagnosticWithSource, type Diagnostic } from '../catalog/index.js';
import {
  diffSnapshots,
  snapshotFilesAtGitRef,
  type CatalogDiff,
  type PricePoint,
  type PriceRow,
} from '../catalog-review/index.js';
import {
  evaluatePrice,
  evaluateRefund,
  openSnapshot,
  readSnapshotFiles,
  type PriceInput,
  type PriceOutput,
  type RefundEvaluation,
  type Snapshot,
  type SnapshotFiles,
} from '../pricing/index.js';
import { atomicToAmount } from '../rules/index.js';
import { options, type Command } from './command-line.js';
import type { Config } from './config.js';
import { DataDirLock } from './data-dir-lock.js';
import { catalogHelp, PRICES_CHANGE_EXIT_CODE, ROW_LIMIT } from './catalog-help.js';
import { previewExtension } from './extension-preview.js';
import { progressReporter } from './progress.js';

const print = (text: string) => process.stdout.write(`${text}\n`);
const printJson = (value: unknown) => print(JSON.stringify(value, null, 2));

async function loadFromDisk(
  config: Config,
): Promise<{ files: SnapshotFiles; snapshot?: Snapshot; diagnostics: Diagnostic[] }> {
  const files = readSnapshotFiles(config.catalogDir, config.rulesDir);
  return { files, ...(await openSnapshot(files)) };
}

function reportDiagnostics(diagnostics: Diagnostic[], files: SnapshotFiles): void {
  for (const d of diagnostics) process.stderr.write(`${formatDiagnosticWithSource(d, files[d.file])}\n`);
}

export const catalogCommands: Record<string, Command> = {
  async 'catalog check'(config, args) {
    const { files, snapshot, diagnostics } = await loadFromDisk(config);
    if (args.includes('--json')) {
      printJson({
        ok: Boolean(snapshot),
        ...(snapshot && {
          catalog_version: snapshot.catalog.settings.catalog_version,
          products: snapshot.catalog.products.length,
          content_hash: snapshot.hash,
        }),
        diagnostics: diagnostics.map((d) => ({
          file: d.file,
          line: d.line,
          column: d.column,
          code: d.code ?? 'invalid',
          message: d.message,
        })),
      });
      return snapshot ? 0 : 1;
    }
    reportDiagnostics(diagnostics, files);
    if (!snapshot) {
      process.stderr.write(
        `${diagnostics.length} problem${diagnostics.length === 1 ? '' : 's'}: the service would refuse this ` +
          `catalog and keep serving the last good one\n`,
      );
      return 1;
    }
    print(
      `catalog_version ${snapshot.catalog.settings.catalog_version}, ${snapshot.catalog.products.length} ` +
        `products, content hash ${snapshot.hash}: ok`,
    );
    return 0;
  },

  async 'catalog diff'(config, args) {
    const { files, snapshot: after, diagnostics } = await loadFromDisk(config);
    if (!after) {
      reportDiagnostics(diagnostics, files);
      process.stderr.write('the catalog on disk is invalid (see catalog check): nothing to compare\n');
      return 1;
    }
    const against = options(args, '--against')[0];
    if (args.includes('--against') && against === undefined) {
      process.stderr.write(`--against needs a git commit or a folder\n\n${catalogHelp['catalog diff']}\n`);
      return 2;
    }
    const { label, files: beforeFiles } = await previousVersion(config, against);
    const { snapshot: before, diagnostics: beforeDiagnostics } = await openSnapshot(beforeFiles);
    if (!before) {
      for (const d of beforeDiagnostics) process.stderr.write(`${label}: ${formatDiagnostic(d)}\n`);
      process.stderr.write(`${label} is not a valid catalog itself: compare with another version\n`);
      return 1;
    }
    const progress = progressReporter(args);
    const diff = await diffSnapshots(before, after, (id, done, total) =>
      progress.report(`pricing ${id}: ${done}/${total} configurations before and after`, done === total),
    );
    if (args.includes('--json')) printJson({ against: label, ...diff });
    else print(diffText(diff, label, args.includes('--all') ? Infinity : ROW_LIMIT));
    return diff.prices_change ? PRICES_CHANGE_EXIT_CODE : 0;
  },

  async 'catalog preview'(config, args) {
    const asked = previewRequest(args);
    if (typeof asked === 'number') return asked;
    const { productId, parameters, billing } = asked;
    const { files, snapshot, diagnostics } = await loadFromDisk(config);
    if (!snapshot) {
      reportDiagnostics(diagnostics, files);
      return 1;
    }
    const extendHours = options(args, '--extend-hours')[0];
    if (extendHours !== undefined)
      return previewExtension(snapshot, productId, parameters, extendHours, args.includes('--json'));
    const evaluation = await evaluatePrice(snapshot, {
      product_id: productId,
      parameters,
      ...(billing && { billing: billing as PriceInput['billing'] }),
    });
    if (evaluation.outcome === 'unknown_product') {
      process.stderr.write(
        `no product ${productId}; the catalog has: ${snapshot.catalog.settings.products.join(', ')}\n`,
      );
      return 1;
    }
    if (evaluation.outcome === 'rejected') {
      if (args.includes('--json')) printJson({ priced: false, ...evaluation.rejection, problems: evaluation.problems });
      else process.stderr.write(`not priced (${evaluation.rejection.code}): ${evaluation.rejection.message}\n`);
      return 1;
    }
    const fired = [...evaluation.trace.product, ...evaluation.trace.quote].filter((t) => t.result).map((t) => t.rule);
    const { output } = evaluation;
    const stopAfter = options(args, '--stop-after-hours')[0];
    if (stopAfter !== undefined && !(Number(stopAfter) >= 0)) {
      process.stderr.write(`--stop-after-hours must be a number of hours, got ${stopAfter}\n`);
      return 2;
    }
    const refund =
      stopAfter === undefined
        ? undefined
        : await previewRefund(snapshot, output, Number(stopAfter), options(args, '--transfer-used-gb')[0] ?? '0');
    if (args.includes('--json')) {
      printJson({
        priced: true,
        content_hash: snapshot.hash,
        ...output,
        rules_fired: fired,
        ...(refund && { refund }),
      });
      return 0;
    }
    printPreview(output, fired, billing, refund && { refund, stopAfter: stopAfter! });
    print(`  catalog on disk: ${snapshot.hash}`);
    return 0;
  },
};

/** The product, parameters and billing `catalog preview` was asked for, or its exit code after saying what is wrong. */
function previewRequest(
  args: string[],
): number | { productId: string; parameters: Record<string, unknown>; billing: string | undefined } {
  const productId = args[0];
  if (!productId || productId.startsWith('--')) {
    process.stderr.write(`catalog preview needs PRODUCT\n\n${catalogHelp['catalog preview']}\n`);
    return 2;
  }
  const parameters: Record<string, unknown> = {};
  for (const pair of options(args, '--param')) {
    const eq = pair.indexOf('=');
    if (eq < 1) {
      process.stderr.write(`--param ${pair}: write NAME=VALUE, e.g. --param duration_hours=2\n`);
      return 2;
    }
    parameters[pair.slice(0, eq)] = parseValue(pair.slice(eq + 1));
  }
  const billing = options(args, '--billing')[0];
  if (billing !== undefined && !['monthly', 'annual', 'one_time'].includes(billing)) {
    process.stderr.write(`--billing must be monthly, annual or one_time, got ${billing}\n`);
    return 2;
  }
  return { productId, parameters, billing };
}

/** A priced configuration as text: its lines, total, orderability, rules and the refund of a stop. */
function printPreview(
  output: PriceOutput,
  fired: string[],
  billing: string | undefined,
  stop: { refund: RefundEvaluation; stopAfter: string } | undefined,
): void {
  print(`${output.product_id} ${describe(output.configuration)}${billing ? ` (billing ${billing})` : ''}`);
  for (const l of output.lines)
    print(
      `  ${l.code.padEnd(20)} ${l.quantity} ${l.unit}${l.item ? ` ${l.item}` : ''} x ${l.rate} = ${l.amount} ${output.currency}`,
    );
  print(
    `  total ${output.amount} ${output.currency} (${output.total_atomic} atomic units, ${output.decimals} decimals)`,
  );
  print(
    `  agents can order it: ` +
      `${output.agent_orderable ? 'yes' : `no (${output.not_orderable_reasons.map((r) => r.code).join(', ')})`}`,
  );
  print(`  rules fired: ${fired.join(', ') || 'none'}`);
  if (!stop) return;
  const { refund, stopAfter } = stop;
  print(
    `  stopped after ${stopAfter} h: refund ${atomicToAmount(refund.amount_atomic, 6)} ${output.currency} ` +
      `(${refund.amount_atomic} atomic units; minimum ${refund.minimum_atomic})`,
  );
  for (const l of refund.lines)
    print(
      `    ${(l.direction === 'deduct' ? '- ' : '+ ') + l.code.padEnd(18)} ${l.quantity} ${l.unit} x ` +
        `${l.rate} = ${l.amount} ${output.currency}`,
    );
}

/** What rules/refunds.json would refund for this order if its service were stopped after some hours. */
async function previewRefund(
  snapshot: Snapshot,
  output: PriceOutput,
  stopAfterHours: number,
  transferUsedGb: string,
): Promise<RefundEvaluation> {
  const hours = Number(output.configuration.duration_hours ?? 0);
  return evaluateRefund(snapshot, {
    refund_id: 'preview',
    service_id: null,
    product_id: output.product_id,
    reason: 'stopped',
    as_of: new Date(0).toISOString(),
    payments: [
      {
        order_id: 'preview',
        kind: 'order',
        amount_atomic: output.total_atomic,
        hours: String(hours),
        unused_hours: String(Math.max(0, hours - stopAfterHours)),
      },
    ],
    refunded_atomic: '0',
    transfer_used_gb: transferUsedGb,
  });
}

function parseValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * The version to compare with: a folder holding catalog/ and rules/, a git commit, or what the running service serves.
 */
async function previousVersion(
  config: Config,
  against: string | undefined,
): Promise<{ label: string; files: SnapshotFiles }> {
  if (against !== undefined) {
    const isDir = await stat(against).then(
      (s) => s.isDirectory(),
      () => false,
    );
    if (isDir) return { label: against, files: readSnapshotFiles(join(against, 'catalog'), join(against, 'rules')) };
    return { label: `git ${against}`, files: await snapshotFilesAtGitRef(against, config.catalogDir, config.rulesDir) };
  }
  const running = await DataDirLock.holder(config.dataDir);
  if (!running?.base_url)
    throw new Error(
      `no service is running on DATA_DIR ${config.dataDir}: start it, or compare with --against REF (e.g. ` +
        `HEAD) or --against DIR`,
    );
  const health = await fetch(`${running.base_url}/health`).then(
    (r) => r.json() as Promise<{ catalog?: { content_hash?: string } }>,
  );
  const hash = health.catalog?.content_hash;
  if (!hash) throw new Error(`${running.base_url}/health did not name a catalog content hash`);
  // The database (and the audit chain) only here: check, preview and the other comparisons start without them.
  const [{ openDatabase }, { AuditLog }] = await Promise.all([
    import('./database-access.js'),
    import('../audit/index.js'),
  ]);
  const { db, close } = await openDatabase(config);
  try {
    const files = await new AuditLog(db).snapshotFiles(hash);
    if (!files)
      throw new Error(
        `the served catalog ${hash} is not stored in the database yet: compare with --against REF or DIR`,
      );
    return { label: `served ${hash}`, files };
  } finally {
    await close();
  }
}

function describe(configuration: Record<string, unknown>): string {
  return (
    Object.entries(configuration)
      .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
      .join(' ') || '(no parameters)'
  );
}

function point(p: PricePoint): string {
  if (!p.priced) return `not priced (${p.code})`;
  return `${p.amount}${p.orderable ? '' : ' (not orderable)'}`;
}

function value(v: unknown): string {
  return v === undefined ? '(none)' : JSON.stringify(v);
}

function rowText(r: PriceRow): string {
  const change =
    r.change_atomic === undefined
      ? ''
      : `${r.change_atomic.startsWith('-') ? '' : '+'}${r.change_atomic} ` +
        `atomic${r.change_percent === undefined ? '' : ` (${r.change_percent.startsWith('-') ? '' : '+'}${r.change_percent}%)`}`;
  const orderability = r.orderability ? `  ${r.orderability.replace(/_/g, ' ')}` : '';
  return `    ${describe(r.configuration)}${r.billing ? ` billing=${r.billing}` : ''}: ${point(r.before)} -> ${point(r.after)}  ${change}${orderability}`;
}

export function diffText(diff: CatalogDiff, label: string, rowLimit: number): string {
  const out = [
    `files on disk (${diff.after_hash}) compared with ${label === `served ${diff.before_hash}` ? label : `${label} (${diff.before_hash})`}`,
  ];
  if (diff.settings.length) {
    out.push('catalog.yaml:');
    for (const f of diff.settings) out.push(`  ${f.pointer}: ${value(f.before)} -> ${value(f.after)}`);
  }
  if (diff.rules.length) {
    out.push('rules:');
    for (const r of diff.rules) out.push(`  ${r.rule} (${r.file}): ${r.change}`);
  }
  for (const p of diff.products) {
    if (p.status === 'unchanged') {
      out.push(`${p.product_id}: unchanged (${p.configurations} configurations, same prices)`);
      continue;
    }
    out.push(`${p.product_id}: ${p.status}`);
    for (const f of p.fields) out.push(`  ${f.pointer}: ${value(f.before)} -> ${value(f.after)}`);
    for (const r of p.rules) out.push(`  rule ${r.rule} ${r.change} (fired for this product)`);
    const becomes = p.changed_rows.filter((r) => r.orderability === 'becomes_orderable').length;
    const stops = p.changed_rows.filter((r) => r.orderability === 'stops_being_orderable').length;
    out.push(
      `  prices: ${p.changed_rows.length} of ${p.configurations} configurations change; ${becomes} become ` +
        `orderable, ${stops} stop being orderable`,
    );
    for (const r of p.changed_rows.slice(0, rowLimit)) out.push(rowText(r));
    if (p.changed_rows.length > rowLimit)
      out.push(`    ... ${p.changed_rows.length - rowLimit} more (--all lists them, --json gives them all)`);
  }
  out.push(diff.prices_change ? 'prices change' : 'no price changes');
  return out.join('\n');
}
