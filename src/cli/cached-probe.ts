/**
 * A health probe answered from its last result for `ms` after it settles, and shared by every caller while it runs:
 * GET /health is unauthenticated, so without this each request would cost a call to the chain's RPC endpoint.
 */
export function cachedProbe<T>(ms: number, probe: () => Promise<T>): () => Promise<T> {
  let last: { value: Promise<T>; until: number } | undefined;
  return () => {
    if (last && last.until > Date.now()) return last.value;
    const entry = { value: probe(), until: Number.POSITIVE_INFINITY };
    last = entry;
    void entry.value
      .finally(() => {
        entry.until = Date.now() + ms;
      })
      .catch(() => {});
    return entry.value;
  };
}
