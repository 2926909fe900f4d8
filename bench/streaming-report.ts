import { writeMarkedSection } from './docs.js';
import type { AdmissionRun, MountsPoint, StreamingResults } from './streaming.js';

/** The streaming benchmark's markdown tables: callback throughput, then concurrent mounts with listeners. */
export function streamingTables(r: StreamingResults): string {
  const admission = (a: AdmissionRun) => {
    const refused =
      Object.entries(a.refused)
        .map(([k, n]) => `${n}× ${k}`)
        .join(', ') || '0';
    return `| ${a.label} | ${a.answers} | ${a.admitted} | ${refused} | ${a.seconds.toFixed(2)} | **${a.perSecond.toFixed(1)}** | ${ms(a.p50Ms)} | ${ms(a.p99Ms)} | ${a.service.count} | ${ms(a.service.meanMs)} |`;
  };
  const groups = ['service', 'icecast', 'postgres', 'sources', 'listeners', 'other'] as const;
  const point = (p: MountsPoint) =>
    `| ${p.mounts} | ${p.sourcesAdmitted} / ${p.mounts} | ${p.listenersAdmitted} / ${p.listeners} in ${p.attachSeconds.toFixed(2)} s | ${p.receiving} / ${p.listenersAdmitted}${p.stalled ? `, ${p.stalled} stalled` : ''}${p.sourcesClosed ? `, ${p.sourcesClosed} sources cut` : ''} | ${p.minKBps.toFixed(2)} / ${p.medianKBps.toFixed(2)} | ${groups.map((g) => `${p.usage[g].cpu.toFixed(3)} / ${p.usage[g].memMb.toFixed(0)}`).join(' | ')} |`;
  return [
    `Icecast URL-auth callbacks, end to end through ${r.icecastVersion} to the service (answers per second as the client sees them; "service" = the callback requests the service's /metrics counted in that window and their mean time in the service):`,
    '',
    '| Case | answers | admitted | refused | seconds | answers/s | p50 ms | p99 ms | callbacks seen by the service | service ms per callback |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
    ...r.sources.map(admission),
    admission(r.listeners),
    '',
    `Concurrent mounts, each with a 64 kbps source and ${r.points[0] ? r.points[0].listeners / r.points[0].mounts : 0} listeners, held ${r.points[0]?.holdSeconds.toFixed(0) ?? '?'} s with the life-cycle worker running; CPU in cores busy over the hold / memory in MB (PSS, summed over the group's processes):`,
    '',
    '| Mounts | sources admitted | listeners admitted | listeners receiving ≥ 90 % of 8 kB/s | listener kB/s min / median | service | Icecast | PostgreSQL | sources (raw clients, 1 process) | listeners (bench process) | other (anvil, …) |',
    '|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
    ...r.points.map(point),
    ...(r.restart
      ? [
          '',
          `A restart of serve (SIGINT, then started again on the same DATA_DIR) with ${r.restart.mounts} mounts streaming; the sources reconnect to the broadcast URLs bought before it, and a listener probes each listen URL bought before it:`,
          '',
          '| Mounts | live before | same URLs in GET /services/{id} after | live after | restart s (stop → answering) | until all back s |',
          '|--:|--:|--:|--:|--:|--:|',
          `| ${r.restart.mounts} | ${r.restart.liveBefore} | ${r.restart.sameUrls} | **${r.restart.liveAfter}** | ${r.restart.restartSeconds.toFixed(1)} | ${r.restart.backSeconds.toFixed(1)} |`,
        ]
      : []),
  ].join('\n');
}

/** Replaces this benchmark's own section in docs/benchmarks.md. */
export function writeStreamingDocsSection(file: string, section: string): Promise<void> {
  return writeMarkedSection(file, 'bench/streaming.ts', section);
}

function ms(v: number): string {
  if (!Number.isFinite(v)) return 'n/a';
  return v < 10 ? v.toFixed(2) : v.toFixed(1);
}
