import type { CatalogProduct, ParameterDescriptor } from '../catalog/index.js';
import { readPath } from '../rules/index.js';
import type { Snapshot } from './snapshot-shape.js';

export interface GridOptions {
  /** How many evenly spaced points between each numeric parameter's minimum and maximum. */
  between: number;
  /** Also the value just above every threshold (a package's size), where the price steps. */
  acrossThresholds: boolean;
  /** Parameters that get only their bounds (no points between): those no rule reads, so they cannot move a price. */
  boundsOnly?: Set<string>;
}

/**
 * Every threshold a derived fact compares a parameter with, per parameter (e.g. the packages' max_duration_hours).
 */
export function thresholds(snapshot: Snapshot, entry: CatalogProduct): Map<string, unknown[]> {
  const found = new Map<string, unknown[]>();
  for (const spec of snapshot.rules.quote.derivedFacts) {
    const [root, ...rest] = spec.from.split('.');
    if (root !== 'product') continue;
    const list = readPath(entry.product, rest.join('.'));
    if (!Array.isArray(list)) continue;
    for (const w of spec.where ?? []) {
      found.set(w.param, [...(found.get(w.param) ?? []), ...list.map((item) => readPath(item, w.field))]);
    }
  }
  return found;
}

/** The grid of configurations: every combination of each parameter's candidate values. */
export function* configurations(
  entry: CatalogProduct,
  extra: Map<string, unknown[]>,
  options: GridOptions = { between: 0, acrossThresholds: false },
): Generator<Record<string, unknown>> {
  const choices = Object.entries(entry.acceptedParameters).map(
    ([name, d]) => [name, candidates(d, extra.get(name) ?? [], pointsFor(name, options))] as const,
  );
  const combine = function* (i: number, acc: Record<string, unknown>): Generator<Record<string, unknown>> {
    if (i === choices.length) {
      yield { ...acc };
      return;
    }
    const [name, values] = choices[i];
    for (const v of values) yield* combine(i + 1, { ...acc, [name]: v });
  };
  yield* combine(0, {});
}

function pointsFor(name: string, options: GridOptions): GridOptions {
  return options.boundsOnly?.has(name) ? { ...options, between: 0 } : options;
}

function candidates(d: ParameterDescriptor, thresholdValues: unknown[], options: GridOptions): unknown[] {
  if (d.type === 'boolean') return [false, true];
  if (d.type !== 'number' && d.type !== 'integer' && d.type !== 'quantity')
    return [d.default ?? (d.type === 'url' ? 'https://example.com/stream' : 'x')];
  const low = d.minimum ?? (d.default as number | undefined) ?? 0;
  const high = d.maximum ?? d.minimum ?? (d.default as number | undefined) ?? 0;
  const values: number[] = [low, high];
  for (let i = 1; i <= options.between; i++) {
    const point = low + ((high - low) * i) / (options.between + 1);
    values.push(Number.isInteger(low) && Number.isInteger(high) ? Math.round(point) : point);
  }
  for (const t of thresholdValues.map(Number).filter(Number.isFinite)) {
    values.push(t);
    if (options.acrossThresholds) values.push(t + 1);
  }
  const inBounds = values.filter(
    (v) => (d.minimum === undefined || v >= d.minimum) && (d.maximum === undefined || v <= d.maximum),
  );
  return [...new Set(inBounds)].sort((a, b) => a - b);
}
