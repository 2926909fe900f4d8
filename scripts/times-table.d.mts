export function runSummary(run: { wallMs: number; fileWallMs: number; cpuMs: number; cores: number }): string;
export function timesTable(times: Map<string, number>, cpu: Map<string, number>): string;
