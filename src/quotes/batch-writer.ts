/**
 * Groups concurrent writes: a write goes at once while fewer than maxInFlight calls are under way; writes that
 * arrive meanwhile wait and go together in the next call. Under load this turns N round trips and N lock
 * acquisitions into a few.
 */
export class BatchWriter<Item, Result> {
  private queue: { item: Item; resolve: (r: Result) => void; reject: (e: unknown) => void }[] = [];
  private inFlight = 0;

  constructor(private readonly writeAll: (items: Item[]) => Promise<Result[]>, private readonly maxInFlight = 2, private readonly maxBatch = 256) {}

  write(item: Item): Promise<Result> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (this.inFlight < this.maxInFlight) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.inFlight++;
    while (this.queue.length) {
      const batch = this.queue.splice(0, this.maxBatch);
      try {
        const results = await this.writeAll(batch.map((b) => b.item));
        batch.forEach((b, i) => b.resolve(results[i]));
      } catch (e) {
        if (batch.length === 1) batch[0].reject(e);
        // One bad write must not fail the others that happened to share its batch: write them one by one.
        else await Promise.all(batch.map((b) => this.writeAll([b.item]).then(([r]) => b.resolve(r), b.reject)));
      }
    }
    this.inFlight--;
  }
}
