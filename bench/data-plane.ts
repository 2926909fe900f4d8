// The data plane in front of Icecast: the front door in serve vs HAProxy (ICECAST_PROXY=haproxy), in
// the same run. For each: a host with S instant-streams of P places, a 64 kbps source on each (raw clients in a
// child process), S × P listeners opened at once from this process and reading their audio, then one more per
// stream (each must be refused); then the listeners held HOLD seconds: CPU of serve, of the proxy (HAProxy's
// process; the front door is inside serve) and of Icecast from /proc, each as a ratio of Icecast's own in the same
// configuration, and the bytes the listeners received against 64 kbps.
// npm run bench:data-plane. Env: DATA_PLANE_STREAMS (20), DATA_PLANE_PLACES (50), DATA_PLANE_HOLD_SECONDS (15),
// DATA_PLANE_PROXIES (front-door,haproxy), NO_WRITE_DOCS=1.
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { writeMarkedSection } from './docs.js';
import { hostCpu, type HostCpu } from './host-cpu.js';
import { listenWithin } from './listener-within.js';
import { liveStreams, type LiveStreams } from './live-streams.js';
import { percentile } from './percentile.js';
import { drain, type OpenListener } from './streaming.js';

const streams = Number(process.env.DATA_PLANE_STREAMS ?? 20);
const places = Number(process.env.DATA_PLANE_PLACES ?? 50);
const HOLD_SECONDS = Number(process.env.DATA_PLANE_HOLD_SECONDS ?? 15);
const root = fileURLToPath(new URL('../', import.meta.url));
const ANSWER_TIMEOUT_MS = 60_000;
const BYTES_PER_SECOND = 8000; // 64 kbps
const signal = AbortSignal.timeout(20 * 60_000);

type Proxy = 'front-door' | 'haproxy';

async function run(proxy: Proxy): Promise<{ row: string }> {
  let live: LiveStreams | undefined;
  const opened: OpenListener[] = [];
  try {
    console.error(`[data-plane] ${proxy}: ${streams} instant-streams of ${places} places, a source on each`);
    live = await liveStreams(root, { count: streams, places, kbps: 64, env: { ICECAST_PROXY: proxy } }, signal);
    const { service, bought, origin } = live;

    console.error(`[data-plane] ${proxy}: ${streams * places} listeners at once`);
    const started = performance.now();
    const answers = await Promise.all(
      bought.flatMap((b) => Array.from({ length: places }, () => listenWithin(b.stream_url, ANSWER_TIMEOUT_MS))),
    );
    opened.push(...answers);
    const times = Float64Array.from(answers.map((a) => a.at - started)).sort();
    const admitted = answers.filter((a) => a.status === 200);
    const refused: Record<string, number> = {};
    for (const a of answers.filter((x) => x.status !== 200)) {
      const key = a.status ? String(a.status) : String(a.error);
      refused[key] = (refused[key] ?? 0) + 1;
    }
    await drain(origin, signal);
    const extra = await Promise.all(bought.map((b) => listenWithin(b.stream_url, ANSWER_TIMEOUT_MS)));
    opened.push(...extra);

    await sleep(2000);
    const bytes0 = admitted.map((a) => a.bytes());
    const cpu0 = await hostCpu(service.process.pid!);
    await sleep(HOLD_SECONDS * 1000);
    const cpu1 = await hostCpu(service.process.pid!);
    const rates = admitted.map((a, i) => (a.bytes() - bytes0[i]) / HOLD_SECONDS / BYTES_PER_SECOND);
    const realTime = rates.filter((r) => r >= 0.95).length;
    const core = (k: keyof HostCpu) => ((cpu1[k] - cpu0[k]) / HOLD_SECONDS) * 100;
    const icecast = core('icecast');
    const ratio = (k: keyof HostCpu) => (icecast > 0 ? `${(core(k) / icecast).toFixed(2)}×` : 'n/a');
    const row =
      `| ${proxy === 'haproxy' ? 'HAProxy (default)' : 'front door in serve (`ICECAST_PROXY=front-door`)'} | ` +
      `${admitted.length} / ${answers.length} | ` +
      `${
        Object.entries(refused)
          .map(([k, n]) => `${n}× ${k}`)
          .join(', ') || '0'
      } | ${(percentile(times, 0.5) / 1000).toFixed(2)} s | ${(percentile(times, 0.95) / 1000).toFixed(2)} s | ` +
      `${(times[times.length - 1] / 1000).toFixed(2)} s | ` +
      `${extra.filter((a) => a.status === 200).length} / ${extra.length} | ${realTime} / ${admitted.length} | ` +
      `${core('serve').toFixed(1)} % (${ratio('serve')}) | ` +
      `${proxy === 'haproxy' ? `${core('proxy').toFixed(1)} % (${ratio('proxy')})` : 'in serve'} | ` +
      `${icecast.toFixed(1)} % | ${core('postgres').toFixed(1)} % |`;
    console.error(row);
    return { row };
  } finally {
    for (const a of opened) a.close();
    await live?.stop();
  }
}

const proxies = (process.env.DATA_PLANE_PROXIES ?? 'front-door,haproxy').split(',') as Proxy[];
const rows = [];
for (const proxy of proxies) rows.push(await run(proxy));
const section = [
  '## Data plane: the front door vs HAProxy (`npm run bench:data-plane`)',
  '',
  `Machine: ${availableParallelism()} cores, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')} at the end (shared with other work). For each data plane, in the same run: a host with ${streams}`,
  `instant-streams of ${places} places, a 64 kbps source on each (raw clients in a child process), ${streams * places}`,
  'listener GETs opened at once from this process (reading their audio), then one more per stream (must be refused);',
  `then the listeners held ${HOLD_SECONDS} s: CPU from /proc (% of one core), each beside Icecast's own in the same`,
  'configuration; "in real time" = listeners that received ≥ 95 % of 64 kbps over the hold.',
  '',
  '| Data plane | admitted | refused | p50 | p95 | last answer | one more per stream admitted | in real time | ' +
    'serve CPU (× Icecast) | proxy CPU (× Icecast) | Icecast CPU | PostgreSQL CPU |',
  '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  ...rows.map((r) => r.row),
  '',
].join('\n');
console.log(section);
if (!process.env.NO_WRITE_DOCS)
  await writeMarkedSection(join(root, 'docs/benchmarks.md'), 'bench/data-plane.ts', section);
