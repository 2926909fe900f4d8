/**
 * Groups concurrent writes: the first write goes at once; writes that arrive while it is in flight wait and go
 * together in the next call. Under load this turns N round trips and N lock acquisitions into one.
 */
export class BatchWriter<Item, Result> {
  private queue: { item: Item; resolve: (r: Result) => void; reject: (e: unknown) => void }[] = [];
  private flushing = false;

  constructor(private readonly writeAll: (items: Item[]) => Promise<Result[]>, private readonly maxBatch = 256) {}

  write(item: Item): Promise<Result> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    while (this.queue.length) {
      const batch = this.queue.splice(0, this.maxBatch);
      try {
        const results = await this.writeAll(batch.map((b) => b.item));
        batch.forEach((b, i) => b.resolve(results[i]));
      } catch (e) {
        for (const b of batch) b.reject(e);
      }
    }
    this.flushing = false;
  }
}
