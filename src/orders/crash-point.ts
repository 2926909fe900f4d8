export type CrashPoint = 'after_claim' | 'after_chain_settle' | 'after_settled' | 'after_provision'
  // A refund: its stop committed, its transfer broadcast, its proof found (before it is recorded).
  | 'refund_after_stop' | 'refund_after_broadcast' | 'refund_after_proof';

const armed = process.env.ORDER_CRASH_AT as CrashPoint | undefined;
const [pauseAt, pauseMs] = (process.env.ORDER_PAUSE_AT ?? '').split(':');

/**
 * Fault injection for the crash tests: with ORDER_CRASH_AT set to this point, the process kills itself here,
 * exactly between two steps of an order, as a power cut would. Does nothing otherwise.
 */
export function crashPoint(point: CrashPoint): void {
  if (armed === point) process.kill(process.pid, 'SIGKILL');
}

/**
 * For the race tests: with ORDER_PAUSE_AT=point:milliseconds the order waits there, as a slow network or a whole
 * block would make it wait, so that a test can act on the chain in between. Resolves at once otherwise.
 */
export function pausePoint(point: CrashPoint): Promise<void> {
  return pauseAt === point ? new Promise((resolve) => setTimeout(resolve, Number(pauseMs))) : Promise.resolve();
}
