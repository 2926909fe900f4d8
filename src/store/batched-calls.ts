/**
 * Groups concurrent database calls (reads or writes): while fewer than maxInFlight calls are under way, the items
 * asked for during the current turn of the event loop go together in one call at its end (setImmediate, right after
 * the I/O callbacks: an idle service adds no wait); items that arrive while maxInFlight calls are under way wait and go
 * together in the next call. Under load this turns N round trips and N lock acquisitions into a few. Each call has a
 * fixed cost (node-postgres, the pool, two socket writes and reads; in PostgreSQL alone a few hundred µs of CPU for
 * record_quotes), which is why items asked for in one turn are not sent one by one.
 */
export class BatchedCalls<Item, Result> {
  private queue: { item: Item; resolve: (r: Result) => void; reject: (e: unknown) => void }[] = [];
  private inFlight = 0;
  private flushScheduled = false;

  constructor(
    private readonly callAll: (items: Item[]) => Promise<Result[]>,
    private readonly maxInFlight = 2,
    private readonly maxBatch = 256,
  ) {}

  call(item: Item): Promise<Result> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (this.inFlight < this.maxInFlight && !this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => {
          this.flushScheduled = false;
          void this.flush();
        });
      }
    });
  }

  private async flush(): Promise<void> {
    this.inFlight++;
    while (this.queue.length) {
      const batch = this.queue.splice(0, this.maxBatch);
      try {
        const results = await this.callAll(batch.map((b) => b.item));
        batch.forEach((b, i) => b.resolve(results[i]));
      } catch (e) {
        if (batch.length === 1) batch[0].reject(e);
        // One bad item must not fail the others that happened to share its batch: call them one by one.
        else await Promise.all(batch.map((b) => this.callAll([b.item]).then(([r]) => b.resolve(r), b.reject)));
      }
    }
    this.inFlight--;
  }
}
