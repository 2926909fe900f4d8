import { createHash } from 'node:crypto';
import type { CatalogProduct } from '../catalog/index.js';
import { evaluatePrice, SnapshotCache, type Snapshot } from '../pricing/index.js';
import { RuleEvaluationError } from '../rules/index.js';

/** What one configuration costs on one version of the catalog. */
export type PricePoint =
  | { priced: true; total_atomic: string; amount: string; orderable: boolean }
  | { priced: false; code: string };

export type Billing = 'monthly' | 'annual' | undefined;

interface Priced {
  point: PricePoint;
  /** The product and quote rules that fired for it. */
  fired: readonly string[];
}

/**
 * A product's price at a configuration depends on its own file, the catalog settings and the rules (every file but
 * the other products'), as its verdict does (pricing/snapshot.ts keeps verdicts by the same inputs). Points are kept
 * by those inputs: a product the edit does not touch is priced once for both sides, and a diff run after another in
 * one process (tests, an editor) reuses the points of the one before. Only the last diff's points are kept.
 */
let kept = new Map<string, Map<string, Priced>>();
let current = new Map<string, Map<string, Priced>>();

/** Starts a diff: the points of the diff before stay available, and only those this one uses are kept after it. */
export function startPricing(): void {
  if (current.size) kept = current;
  current = new Map();
}

/** The price of one configuration of one product of a snapshot, and the rules that fired for it. */
export async function pricePoint(
  snapshot: Snapshot | undefined,
  id: string,
  configuration: Record<string, unknown>,
  configurationKey: string,
  billing: Billing,
): Promise<Priced> {
  const entry = snapshot?.catalog.byId.get(id);
  if (!snapshot || !entry) return { point: { priced: false, code: 'no_such_product' }, fired: [] };
  const points = pointsOf(inputsKey(snapshot, entry));
  const key = `${billing ?? ''}\0${configurationKey}`;
  let priced = points.get(key);
  if (!priced) {
    priced = await evaluate(snapshot, id, configuration, billing);
    points.set(key, priced);
  }
  return priced;
}

function pointsOf(inputs: string): Map<string, Priced> {
  let points = current.get(inputs);
  if (!points) {
    points = kept.get(inputs) ?? new Map();
    current.set(inputs, points);
  }
  return points;
}

async function evaluate(
  snapshot: Snapshot,
  id: string,
  parameters: Record<string, unknown>,
  billing: Billing,
): Promise<Priced> {
  try {
    const evaluation = await evaluatePrice(snapshot, { product_id: id, parameters, ...(billing && { billing }) });
    if (evaluation.outcome === 'unknown_product')
      return { point: { priced: false, code: 'no_such_product' }, fired: [] };
    if (evaluation.outcome === 'rejected')
      return { point: { priced: false, code: evaluation.rejection.code }, fired: [] };
    const fired = [...evaluation.trace.product, ...evaluation.trace.quote].filter((t) => t.result).map((t) => t.rule);
    const { total_atomic, amount, agent_orderable } = evaluation.output;
    return { point: { priced: true, total_atomic, amount, orderable: agent_orderable }, fired };
  } catch (e) {
    if (e instanceof RuleEvaluationError) return { point: { priced: false, code: 'rule_error' }, fired: [] };
    throw e;
  }
}

const inputKeys = new SnapshotCache<Map<string, string>>();

/** Everything a product's prices depend on, as a key: the hash of every file but the other products', and its own. */
function inputsKey(snapshot: Snapshot, entry: CatalogProduct): string {
  const keys = inputKeys.get(snapshot, () => new Map());
  let key = keys.get(entry.file);
  if (key === undefined) {
    const shared = createHash('sha256');
    for (const path of Object.keys(snapshot.files).sort())
      if (!path.startsWith('catalog/products/'))
        shared.update(path).update('\0').update(snapshot.files[path]).update('\0');
    const own = createHash('sha256').update(entry.file).update('\0').update(snapshot.files[entry.file]);
    key = `${shared.digest('hex')} ${own.digest('hex')}`;
    keys.set(entry.file, key);
  }
  return key;
}
