import type { EventEmitter } from 'node:events';

export function clockTicks(): number;
export function reapedChildrenTicks(stat?: string): number;
export interface ChildCpuAccount {
  track(child: EventEmitter, name: string): void;
  seconds: Map<string, number>;
  settled(): Promise<void>;
  shared(): number;
}
export function childCpuAccount(readTicks?: () => number, ticksPerSecond?: number): ChildCpuAccount;
export function trackSpawns(
  childProcess: typeof import('node:child_process'),
  account: ChildCpuAccount,
  nameOf: (args: string[]) => string,
): void;
