import type { Snapshot } from './snapshot-shape.js';

/**
 * Values derived from one catalog snapshot (documents, schemas, billing tables): built at first use and dropped with
 * the snapshot when a reload replaces it, so nothing derived from an old catalog is ever served.
 */
export class SnapshotCache<T> {
  private readonly values = new WeakMap<Snapshot, T>();

  get(snapshot: Snapshot, build: () => T): T {
    if (!this.values.has(snapshot)) this.values.set(snapshot, build());
    return this.values.get(snapshot)!;
  }
}

/**
 * Like SnapshotCache, with one value per key within a snapshot. Keys may come from requests (a product id, a base
 * URL), so at most `maxKeys` are kept per snapshot: past that the map starts again.
 */
export class KeyedSnapshotCache<T> {
  private readonly values = new WeakMap<Snapshot, Map<string, T>>();

  constructor(private readonly maxKeys = 100) {}

  get(snapshot: Snapshot, key: string, build: () => T): T {
    let byKey = this.values.get(snapshot);
    if (!byKey) this.values.set(snapshot, (byKey = new Map()));
    if (!byKey.has(key)) {
      if (byKey.size >= this.maxKeys) byKey.clear();
      byKey.set(key, build());
    }
    return byKey.get(key)!;
  }
}
