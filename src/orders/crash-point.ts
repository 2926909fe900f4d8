export type CrashPoint =
  | 'after_claim'
  | 'after_chain_settle'
  | 'after_settled'
  | 'after_provision'
  // A refund: its stop committed, its transfer broadcast, its proof found (before it is recorded).
  | 'refund_after_stop'
  | 'refund_after_broadcast'
  | 'refund_after_proof';

let armed: string | undefined;
let pause: { at: string; ms: number } | undefined;

/**
 * For the crash and race tests only (ORDER_CRASH_AT, ORDER_PAUSE_AT=point:milliseconds; refused in production by the
 * configuration): serve arms them at start.
 */
export function armCrashPoints(hooks: { crashAt?: string; pauseAt?: string }): void {
  armed = hooks.crashAt;
  const [at, ms] = (hooks.pauseAt ?? '').split(':');
  pause = at ? { at, ms: Number(ms) } : undefined;
}

/**
 * Fault injection for the crash tests: with a crash armed at this point, the process kills itself here, exactly
 * between two steps of an order, as a power cut would. Does nothing otherwise.
 */
export function crashPoint(point: CrashPoint): void {
  if (armed === point) process.kill(process.pid, 'SIGKILL');
}

/**
 * For the race tests: with a pause armed at this point the order waits there, as a slow network or a whole block
 * would make it wait, so that a test can act on the chain in between. Resolves at once otherwise.
 */
export function pausePoint(point: CrashPoint): Promise<void> {
  return pause?.at === point ? new Promise((resolve) => setTimeout(resolve, pause!.ms)) : Promise.resolve();
}
