/**
 * The targets, judged over several runs of the same benchmark: each ratio's min / median / max, and the
 * verdict on the median (one run on a shared machine is not enough to call a target met or missed).
 */
export interface SpreadRow {
  name: string;
  goal: string;
  /** One value per run. */
  values: number[];
  format: (v: number) => string;
  /** Absent for a figure that is only reported beside a target. */
  met?: (v: number) => boolean;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function spreadTable(rows: SpreadRow[]): string {
  const runs = Math.max(0, ...rows.map((r) => r.values.length));
  return [
    `Targets over ${runs} run${runs === 1 ? '' : 's'} (min / median / max; verdict on the median, runs met in brackets):`,
    '',
    '| Target | Goal | min | median | max | Result |',
    '|---|---|--:|--:|--:|---|',
    ...rows
      .filter((r) => r.values.length)
      .map((r) => {
        const m = median(r.values);
        const met = r.met;
        const result = met
          ? `${met(m) ? 'met' : '**MISSED**'} (${r.values.filter(met).length}/${r.values.length})`
          : '—';
        return `| ${r.name} | ${r.goal} | ${r.format(Math.min(...r.values))} | ${r.format(m)} | ${r.format(Math.max(...r.values))} | ${result} |`;
      }),
  ].join('\n');
}
