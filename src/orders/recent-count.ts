/**
 * A count read from PostgreSQL for the checks before payment, reused for at most a second (on the same `tag`, e.g. the
 * catalog snapshot). A sale this instance claims is added to it rather than read again. A read answered after the
 * sale's claim began may include the sale already: it is then counted twice, on the safe side, until the next read. A
 * refusal is never made on such a count (the caller reads it again first), so at worst it costs a read; dropping it
 * instead made most checks before payment read again while claims overlap (8 buyers at once).
 */
export class RecentCount<T> {
  private entry?: { at: number; tag: unknown; value: Promise<T> };

  constructor(private readonly maxAgeMs = 1000) {}

  get(read: () => Promise<T>, tag?: unknown): Promise<T> {
    const entry = this.entry;
    if (entry && entry.tag === tag && Date.now() - entry.at <= this.maxAgeMs) return entry.value;
    const next = { at: Date.now(), tag, value: read() };
    next.value.catch(() => {
      if (this.entry === next) this.entry = undefined;
    });
    this.entry = next;
    return next.value;
  }

  /** A sale this instance claimed: added by `change` (perhaps twice, see the class). */
  add(change: (value: T) => T): void {
    const entry = this.entry;
    if (entry) this.entry = { ...entry, value: entry.value.then(change) };
  }

  forget(): void {
    this.entry = undefined;
  }
}
