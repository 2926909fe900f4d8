/** The listener-capacity benchmark's tables: each run's figures beside the anchor, and the targets over the runs. */
import type { HlsResult } from './capacity-hls.js';
import type { PlaneResult } from './capacity-planes.js';
import { type Burst, refusedCount } from './listener-hold.js';
import { type SpreadRow, spreadTable } from './spread.js';

export interface CapacityRun {
  anchor: PlaneResult;
  hosts: PlaneResult[];
  hls?: HlsResult;
}

const NAMES: Record<PlaneResult['plane'], string> = {
  anchor: 'Icecast alone (the anchor)',
  haproxy: 'host, HAProxy (`ICECAST_PROXY=haproxy`)',
  'front-door': 'host, front door in serve (`ICECAST_PROXY=front-door`)',
};

const pct = (v: number | undefined) => (v === undefined || Number.isNaN(v) ? '—' : `${v.toFixed(1)} %`);
/** % of one core per 1,000 listeners held. */
export const perThousand = (p: PlaneResult) => (p.hostCores / Math.max(1, p.burst.admitted)) * 1000;
export const ratio = (p: PlaneResult, anchor: PlaneResult) => perThousand(p) / perThousand(anchor);

/** The goal for opening every listener at once: 2 s for 2,000, 10 s beyond. */
export const admissionGoalSeconds = (listeners: number) => (listeners <= 2000 ? 2 : 10);

function planeRow(p: PlaneResult, anchor: PlaneResult): string {
  const b = p.burst;
  const refused = Object.entries(b.refused)
    .map(([k, n]) => `${n}× ${k}`)
    .join(', ');
  const c = p.held.cores;
  const serve = p.plane === 'anchor' ? '—' : `${pct(p.idle.serve)} → ${pct(c.serve)}`;
  return (
    `| ${NAMES[p.plane]} | ${b.admitted} / ${b.listeners} | ${refused || '0'} | ${b.p50Seconds.toFixed(2)} s | ${b.p90Seconds.toFixed(2)} s | ` +
    `${b.allAdmittedSeconds.toFixed(2)} s | ${oneMoreCell(p.extra)} | ` +
    `${p.held.realTime} / ${b.admitted} (slowest ${(p.held.slowest * 100).toFixed(0)} %) | ` +
    `${serve} | ${pct(c.proxy)} | ${pct(c.icecast)} | ${pct(c.postgres)} | ${pct(p.hostCores)} | ` +
    `${perThousand(p).toFixed(2)} % (${ratio(p, anchor).toFixed(2)}×) |`
  );
}

/** Full streams' extra listeners admitted of tried, and apart those on streams a refused listener left room on. */
function oneMoreCell(extra: PlaneResult['extra']): string {
  if (!extra) return 'no cap';
  const room = extra.roomTried ? ` (on streams with room: ${extra.roomAdmitted} / ${extra.roomTried})` : '';
  return `${extra.admitted} / ${extra.tried}${room}`;
}

function burst2000Line(p: PlaneResult): string {
  const b = p.burst2000!;
  return (
    `${NAMES[p.plane]}, ${b.listeners} opened at once alone: ${b.admitted} admitted, ${refusedCount(b)} refused, ` +
    `p50 ${b.p50Seconds.toFixed(2)} s, p90 ${b.p90Seconds.toFixed(2)} s, all admitted after ${b.allAdmittedSeconds.toFixed(2)} s.`
  );
}

function hlsLine(h: HlsResult): string {
  const r = h.report;
  return (
    `HLS: ${h.players} players of one stream (${r.playing} got segments, ${r.segments} segments, ` +
    `${(r.bytes / 1e6).toFixed(1)} MB, ${r.failures} failed polls, ${r.retries} admissions retried), ` +
    `${h.seconds.toFixed(0)} s measured: serve ${pct(h.cores.serve)}, nginx ${pct(h.cores.nginx)}, ` +
    `PostgreSQL ${pct(h.cores.postgres)} of one core.`
  );
}

export function runTable(run: CapacityRun, index: number): string {
  return [
    `Run ${index + 1}:`,
    '',
    '| Data plane | admitted | refused | p50 | p90 | all admitted | one more per full stream admitted | in real time | ' +
      'serve (no listener → held) | proxy | Icecast | PostgreSQL | whole plane | per 1,000 held (× anchor) |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
    planeRow(run.anchor, run.anchor),
    ...run.hosts.map((h) => planeRow(h, run.anchor)),
    '',
    ...run.hosts.flatMap((h) => (h.burst2000 ? [burst2000Line(h), ''] : [])),
    ...(run.hls ? [hlsLine(run.hls), ''] : []),
  ].join('\n');
}

const burstSeconds = (b: Burst) => (refusedCount(b) ? Number.POSITIVE_INFINITY : b.allAdmittedSeconds);

function planeTargets(runs: CapacityRun[], plane: PlaneResult['plane']): SpreadRow[] {
  const of = (r: CapacityRun) => r.hosts.find((h) => h.plane === plane)!;
  const listeners = runs[0].anchor.burst.listeners;
  const goal = admissionGoalSeconds(listeners);
  const name = plane === 'haproxy' ? 'HAProxy' : 'front door';
  const num =
    (digits: number, unit = '') =>
    (v: number) =>
      `${v.toFixed(digits)}${unit}`;
  return [
    {
      name: `${name}: whole host's CPU per held listener ÷ Icecast alone's`,
      goal: '≤ 1.3×',
      values: runs.map((r) => ratio(of(r), r.anchor)),
      format: num(2, '×'),
      met: (v) => v <= 1.3,
    },
    {
      name: `${name}: serve's CPU while ${listeners} listeners are held`,
      goal: '≤ 3 % of a core (at 2,000)',
      values: runs.map((r) => of(r).held.cores.serve),
      format: num(1, ' %'),
      met: (v) => v <= 3,
    },
    {
      name: `${name}: ${listeners} opened at once, all admitted after (∞: some refused)`,
      goal: `≤ ${goal} s`,
      values: runs.map((r) => burstSeconds(of(r).burst)),
      format: num(2, ' s'),
      met: (v) => v <= goal,
    },
    ...(runs[0].hosts.some((h) => h.burst2000)
      ? [
          {
            name: `${name}: 2,000 opened at once, all admitted after (∞: some refused)`,
            goal: '≤ 2 s',
            values: runs.map((r) => burstSeconds(of(r).burst2000!)),
            format: num(2, ' s'),
            met: (v: number) => v <= 2,
          },
        ]
      : []),
    {
      name: `${name}: one more listener per full stream admitted`,
      goal: '0',
      values: runs.map((r) => of(r).extra?.admitted ?? Number.NaN),
      format: num(0),
      met: (v) => v === 0,
    },
    {
      name: `${name}: listeners in real time (≥ 95 % of the bitrate over the hold)`,
      goal: '100 %',
      values: runs.map((r) => (of(r).held.realTime / of(r).burst.listeners) * 100),
      format: num(1, ' %'),
      met: (v) => v >= 100,
    },
  ];
}

export function targetsTable(runs: CapacityRun[]): string {
  const planes = runs[0].hosts.map((h) => h.plane);
  const hls = runs.flatMap((r) => (r.hls ? [r.hls] : []));
  const rows: SpreadRow[] = [
    {
      name: 'Icecast alone: CPU per 1,000 held listeners (the anchor)',
      goal: '—',
      values: runs.map((r) => perThousand(r.anchor)),
      format: (v) => `${v.toFixed(2)} %`,
    },
    ...planes.flatMap((p) => planeTargets(runs, p)),
  ];
  if (hls.length)
    rows.push(
      {
        name: `HLS: serve's CPU with ${hls[0].players} players of one stream`,
        goal: '< 5 % of a core (at 5,000)',
        values: hls.map((h) => h.cores.serve),
        format: (v) => `${v.toFixed(1)} %`,
        met: (v) => v < 5,
      },
      {
        name: `HLS: nginx's CPU with them (beside it)`,
        goal: '—',
        values: hls.map((h) => h.cores.nginx),
        format: (v) => `${v.toFixed(1)} %`,
      },
    );
  return spreadTable(rows);
}
