/**
 * A count read from PostgreSQL for the checks before payment, reused for at most a second (on the same `tag`, e.g. the
 * catalog snapshot). A sale this instance claims is added to it rather than read again, but only to a count that was
 * read completely before the sale's claim began: a read answered later may include the sale already, and is dropped.
 */
export class RecentCount<T> {
  private entry?: { at: number; tag: unknown; value: Promise<T>; answeredAt?: number };

  constructor(private readonly maxAgeMs = 1000) {}

  get(read: () => Promise<T>, tag?: unknown): Promise<T> {
    const entry = this.entry;
    if (entry && entry.tag === tag && Date.now() - entry.at <= this.maxAgeMs) return entry.value;
    const next: NonNullable<typeof this.entry> = { at: Date.now(), tag, value: read() };
    next.value.then(
      () => {
        next.answeredAt = Date.now();
      },
      () => {
        if (this.entry === next) this.entry = undefined;
      },
    );
    this.entry = next;
    return next.value;
  }

  /** A sale whose claim began at `claimStartedAt` (ms): added by `change`, or the count is dropped (see the class). */
  add(claimStartedAt: number, change: (value: T) => T): void {
    const entry = this.entry;
    if (!entry) return;
    if (entry.answeredAt === undefined || entry.answeredAt > claimStartedAt) this.entry = undefined;
    else this.entry = { ...entry, value: entry.value.then(change) };
  }

  forget(): void {
    this.entry = undefined;
  }
}
