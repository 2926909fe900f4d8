// Admission at the scale of a host (npm run bench:admission, or npm run bench -- --only admission): S instant-streams
// of P listener places each, a 64 kbps source on every one, then S × P listeners opened at once (one socket each,
// no pacing); how many are admitted, how fast, how many are refused although their stream had room; then one more
// listener per stream, which must be refused (the cap stays exact). CPU per callback from /proc.
// Two bursts on the same streams: the listeners read their audio at once, as players do; then (all closed first)
// they read nothing until every one has its answer, so that this process, on the same cores, measures admissions
// rather than its own receiving of audio (the service then relays next to nothing during the burst).
// Env: ADMISSION_STREAMS (40), ADMISSION_PLACES (50), NO_WRITE_DOCS=1, ADMISSION_PROFILE=1 (a V8 CPU profile of serve,
// summed over the bursts). `--runs n`: each burst n times on the same streams, a row each.
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Service } from '../test/support/service.js';
import type { BoughtStream } from './bought-streams.js';
import { formatSummary, summarizeFile } from './cpu-profile-summary.js';
import { writeMarkedSection } from './docs.js';
import { hostCpu, type HostCpu } from './host-cpu.js';
import { listenWithin } from './listener-within.js';
import { liveStreams, type LiveStreams } from './live-streams.js';
import { percentile } from './percentile.js';
import { callbackMetrics, drain, type OpenListener } from './streaming.js';

const streams = Number(process.env.ADMISSION_STREAMS ?? 40);
const places = Number(process.env.ADMISSION_PLACES ?? 50);
const root = fileURLToPath(new URL('../', import.meta.url));
const ANSWER_TIMEOUT_MS = 90_000;
const runsAt = process.argv.indexOf('--runs');
const runs = runsAt === -1 ? 1 : Number(process.argv[runsAt + 1]);
const profileDir =
  process.env.ADMISSION_PROFILE === '1' ? await mkdtemp(join(tmpdir(), 'admission-profile-')) : undefined;
if (profileDir) process.env.TEST_NODE_FLAGS = `--cpu-prof --cpu-prof-dir=${profileDir}`;
/** The bursts' spans on the monotonic clock (µs), for the profile. */
const windows: Array<[number, number]> = [];

function tally(answers: OpenListener[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const a of answers) {
    const key = a.status ? String(a.status) : `error ${a.error}`;
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

let live: LiveStreams | undefined;
const signal = AbortSignal.timeout(15 * 60_000);
try {
  console.error(`[admission] ${streams} instant-streams of ${places} places, a source on each`);
  live = await liveStreams(root, { count: streams, places, kbps: 64 }, signal);
  const { service, bought } = live;
  console.error(`[admission] sources: ${live.sources.admitted} admitted, ${live.sources.refused} refused`);

  const rows = [];
  for (let run = 0; run < runs; run++)
    for (const readAfter of [false, true]) rows.push(await burst(service, bought, readAfter));
  const machine =
    `Machine: ${availableParallelism()} cores, load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} at the end ` + '(shared with other work)';
  const section = [
    '## Admission at the scale of a host (`npm run bench:admission`)',
    '',
    `${machine}. ${streams} instant-streams of ${places} listener places on one host, a 64 kbps source on each`,
    `(raw clients in a child process, bench/streaming-sources.ts); then ${streams * places} listener GETs opened at`,
    'once from this process (one socket each, no pacing) on their stream URLs; every answer counts (200 admitted,',
    'anything else refused: a status, a reset, or no answer within 90 s). Then one more listener per stream, all full:',
    'each must be refused. Twice: the listeners reading their audio at once, as players do; then, all closed, the',
    'same burst with listeners that read nothing until every one has its answer (this process shares the 2 cores: it',
    'then measures the admissions rather than its own receiving of 2,000 streams). The proxy in front of Icecast is',
    '`ICECAST_PROXY` (HAProxy by default). ms in the callback handler = the mean of icecast_callback_duration_seconds.',
    'CPU per callback = CPU seconds from /proc/<pid>/stat over the burst (until the',
    "service's callback count stands still) ÷ callbacks the service's /metrics counted (listener_add, and the",
    "listener_remove of refused ones): serve's own process, its PostgreSQL (all backends), its Icecast.",
    '',
    '| Run | streams × places | admitted | refused (while the stream had room) | p50 | p90 | last | ' +
      'a 51st listener admitted | callbacks | ms in the callback handler (mean) | serve CPU ms / callback | ' +
      'PostgreSQL CPU ms / callback | Icecast CPU ms / callback |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
    ...rows.map((r) => r.row),
    '',
    ...rows.map((r) => r.held),
    '',
  ].join('\n');
  console.log(section);
  if (!process.env.NO_WRITE_DOCS)
    await writeMarkedSection(join(root, 'docs/benchmarks.md'), 'bench/admission.ts', section);
} finally {
  await live?.stop();
}
if (profileDir) {
  const [file] = (await readdir(profileDir)).filter((f) => f.endsWith('.cpuprofile'));
  for (const [from, to] of windows)
    if (file) console.log(`${from} ${to}\n${formatSummary(await summarizeFile(join(profileDir, file), from, to, 60))}`);
  console.log(`profile: ${profileDir}`);
}

/** One burst of every place at once on `bought`; its table row and what holding the listeners cost. */
async function burst(
  service: Service,
  bought: BoughtStream[],
  readAfter: boolean,
): Promise<{ row: string; held: string }> {
  const origin = new URL(service.metricsUrl).origin;
  const opened: OpenListener[] = [];
  try {
    const callbacks0 = await callbackMetrics(origin);
    const cpu0 = await hostCpu(service.process.pid!);
    console.error(`[admission] ${streams * places} listeners at once`);
    const started = performance.now();
    const from = Number(process.hrtime.bigint() / 1000n);
    const urls = bought.flatMap((b) => Array.from({ length: places }, () => b.stream_url));
    let burstOver: () => void = () => undefined;
    const burstDone = new Promise<void>((resolve) => {
      burstOver = resolve;
    });
    const answers = await Promise.all(
      urls.map((url) => listenWithin(url, ANSWER_TIMEOUT_MS, readAfter ? burstDone : undefined)),
    );
    burstOver();
    opened.push(...answers);
    const times = Float64Array.from(answers.map((a) => a.at - started)).sort();
    const admitted = answers.filter((a) => a.status === 200).length;
    const perSecond = new Map<number, number>();
    for (const t of times) perSecond.set(Math.floor(t / 1000), (perSecond.get(Math.floor(t / 1000)) ?? 0) + 1);
    console.error(`[admission] answers per second: ${[...perSecond].map(([sec, n]) => `${sec}s:${n}`).join(' ')}`);
    const icecastLog = await readFile(join(service.dataDir, 'icecast', 'error.log'), 'utf8').catch(() => '');
    const pending = [
      ...icecastLog.matchAll(/(\d\d:\d\d:\d\d)\] INFO auth\/queue_auth_client auth on .* has (\d+) pending/g),
    ];
    const deepest = new Map<string, number>();
    for (const [, at, n] of pending) deepest.set(at, Math.max(deepest.get(at) ?? 0, Number(n)));
    console.error(`[admission] Icecast auth queue, deepest per second: ${[...deepest.values()].slice(-40).join(' ')}`);
    await drain(origin, signal);
    windows.push([from, Number(process.hrtime.bigint() / 1000n)]);
    const cpu1 = await hostCpu(service.process.pid!);
    const callbacks1 = await callbackMetrics(origin);
    const count = callbacks1.count - callbacks0.count;

    // One more listener per stream: every stream is full, so each must be refused.
    const extra = await Promise.all(bought.map((b) => listenWithin(b.stream_url, ANSWER_TIMEOUT_MS)));
    opened.push(...extra);
    const extraAdmitted = extra.filter((a) => a.status === 200).length;

    // Held: what carrying them costs serve (with the front door it relays every byte Icecast sends them).
    const HOLD_SECONDS = 10;
    const held0 = await hostCpu(service.process.pid!);
    await sleep(HOLD_SECONDS * 1000);
    const held1 = await hostCpu(service.process.pid!);
    const cores = (k: keyof HostCpu) => `${(((held1[k] - held0[k]) / HOLD_SECONDS) * 100).toFixed(1)} %`;
    const receiving = answers.filter((a) => a.status === 200 && a.bytes() > 0).length;
    const perCallback = (s: number) => (count ? ((s * 1000) / count).toFixed(3) : 'n/a');
    const refused = tally(answers.filter((a) => a.status !== 200));
    const label = readAfter ? 'listeners read once all are answered' : 'listeners read at once';
    const row =
      `| ${label} | ${streams} × ${places} | ${admitted} / ${answers.length} ` +
      `(${((admitted / answers.length) * 100).toFixed(1)} %) | ` +
      `${
        Object.entries(refused)
          .map(([k, n]) => `${n}× ${k}`)
          .join(', ') || '0'
      } | ${seconds(percentile(times, 0.5))} | ${seconds(percentile(times, 0.9))} | ` +
      `${seconds(times[times.length - 1])} | ${extraAdmitted} / ${extra.length} | ${count} | ` +
      `${count ? (((callbacks1.sum - callbacks0.sum) / count) * 1000).toFixed(3) : 'n/a'} | ` +
      `${perCallback(cpu1.serve - cpu0.serve)} | ${perCallback(cpu1.postgres - cpu0.postgres)} | ` +
      `${perCallback(cpu1.icecast - cpu0.icecast)} |`;
    const held =
      `${label}: the ${admitted} admitted listeners then held ${HOLD_SECONDS} s (${receiving} receiving audio): ` +
      `serve ${cores('serve')}, Icecast ${cores('icecast')}, PostgreSQL ${cores('postgres')} of one core.`;
    return { row, held };
  } finally {
    for (const a of opened) a.close();
    await sleep(3000); // their listener_remove callbacks
    await drain(origin, signal);
  }
}
