export type CrashPoint = 'after_claim' | 'after_chain_settle' | 'after_settled' | 'after_provision';

const armed = process.env.ORDER_CRASH_AT as CrashPoint | undefined;

/**
 * Fault injection for the crash tests: with ORDER_CRASH_AT set to this point, the process kills itself here,
 * exactly between two steps of an order, as a power cut would. Does nothing otherwise.
 */
export function crashPoint(point: CrashPoint): void {
  if (armed === point) process.kill(process.pid, 'SIGKILL');
}
