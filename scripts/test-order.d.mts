export const TIMES_FILE: string;
export interface KeptTimes {
  times: Map<string, number>;
  measured: boolean;
}
export function readTimes(path?: string): KeptTimes;
export function slowestFirst(files: string[], times: Map<string, number>): string[];
export function mergedTimes(previous: KeptTimes, measured: Map<string, number>, files: string[]): Record<string, number>;
export function readCpu(path?: string): Map<string, number>;
export function writeTimes(ms: Record<string, number>, path?: string, cpuMs?: Record<string, number>): void;
