const ignore = () => undefined;

/**
 * Wraps `round` (e.g. one reading and saving of the chain) so that rounds never overlap and one round
 * serves every caller that arrived before it started: a caller joins the round that is waiting to
 * start, or else queues one behind the round in progress (whose reading may predate the caller's
 * change). Under load there is at most one round running and one waiting, however many callers there
 * are, and each caller's promise settles with the outcome of a round that started after the call.
 * `round` must take its reading (e.g. the chain's head) after it is called, never from before.
 */
export function coalesce(round: () => Promise<void>): () => Promise<void> {
  let tail: Promise<void> = Promise.resolve();
  let waiting: Promise<void> | undefined;
  return () => {
    waiting ??= tail = tail.then(ignore, ignore).then(() => {
      waiting = undefined;
      return round();
    });
    return waiting;
  };
}
