// Listeners a host carries, against the physical limit of this machine (npm run bench:listener-capacity).
// Per run: S streams of P places at 32 kbps (raw source clients in a child process) and S × P listeners opened at once
// by raw clients in child processes of their own (bench/listener-clients.ts), then held; on
//  1. the anchor: Icecast alone, no proxy, no callbacks (bench/bare-icecast.ts), its CPU the denominator;
//  2. a host as serve runs one, in HAProxy mode and in front-door mode: admissions, one more listener per full
//     stream (refused), every process's CPU while the listeners are held, as a ratio of the anchor's per listener;
//  3. HLS: N players of one stream (playlists from serve, segments from nginx): serve's and nginx's CPU.
// Env: LISTENER_CAPACITY_STREAMS (200), LISTENER_CAPACITY_PLACES (50), LISTENER_CAPACITY_HOLD_SECONDS (30),
// LISTENER_CAPACITY_HLS_PLAYERS (5000; 0 skips HLS), LISTENER_CAPACITY_PLANES (haproxy,front-door),
// LISTENER_CAPACITY_RUNS or --runs n (1), NO_WRITE_DOCS=1.
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { measureHls } from './capacity-hls.js';
import { measureAnchor, measureHost, type Shape } from './capacity-planes.js';
import { writeMarkedSection } from './docs.js';
import { ListenerFleet } from './listener-fleet.js';
import { type CapacityRun, runTable, targetsTable } from './listener-capacity-section.js';
import { ensureOpenFiles } from './open-files.js';

const env = (name: string, fallback: number) => Number(process.env[`LISTENER_CAPACITY_${name}`] ?? fallback);
const streams = env('STREAMS', 200);
const places = env('PLACES', 50);
const holdSeconds = env('HOLD_SECONDS', 30);
const hlsPlayers = env('HLS_PLAYERS', 5000);
const runsFlag = process.argv.indexOf('--runs');
const runs = runsFlag > 0 ? Number(process.argv[runsFlag + 1]) : env('RUNS', 1);
const planes = (process.env.LISTENER_CAPACITY_PLANES ?? 'haproxy,front-door').split(',') as Array<
  'haproxy' | 'front-door'
>;
const KBPS = 32;
const root = fileURLToPath(new URL('../', import.meta.url));
const listeners = streams * places;

// One descriptor per listener in Icecast and in the listeners' children, two in the front door's serve (HAProxy
// spreads its own over as many processes as the limit needs), and room for the rest.
await ensureOpenFiles((planes.includes('front-door') ? 2 : 1) * listeners + 5000);
const loadAverage = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
const loadAtStart = loadAverage();

async function oneRun(index: number): Promise<CapacityRun> {
  const signal = AbortSignal.timeout(60 * 60_000);
  const fleet = await ListenerFleet.start(root, listeners + streams);
  const shape: Shape = { root, streams, places, kbps: KBPS, holdSeconds, fleet, signal };
  try {
    console.error(`[listener-capacity] run ${index + 1}: the anchor, ${listeners} listeners on Icecast alone`);
    const anchor = await measureAnchor(shape);
    const hosts = [];
    console.error(`[listener-capacity] anchor: ${JSON.stringify(anchor)}`);
    for (const plane of planes) {
      hosts.push(await measureHost(shape, plane));
      console.error(`[listener-capacity] ${plane}: ${JSON.stringify(hosts.at(-1))}`);
    }
    await fleet.stop();
    const hls = hlsPlayers > 0 ? await measureHls(root, hlsPlayers, holdSeconds, KBPS) : undefined;
    const run = { anchor, hosts, hls };
    console.error(runTable(run, index));
    return run;
  } finally {
    await fleet.stop();
  }
}

const results: CapacityRun[] = [];
for (let i = 0; i < runs; i++) results.push(await oneRun(i));
const section = [
  '## Listener capacity: a host against Icecast alone (`npm run bench:listener-capacity`)',
  '',
  `Machine: ${availableParallelism()} cores, load average ${loadAtStart} at the start, ${loadAverage()} at the end.`,
  `${streams} streams of ${places} places at ${KBPS} kbps (raw source clients replaying an MP3 in a child process);`,
  `${listeners} listeners opened at once by raw clients in child processes of their own, then held ${holdSeconds} s;`,
  '"in real time" = received ≥ 95 % of the bitrate over the hold. The anchor: Icecast alone with serve\'s limits, no proxy, no',
  'callbacks. A host: `serve` with its proxy, Icecast and PostgreSQL (the dev chain left out). CPU: % of one core from',
  '/proc; "whole plane" sums every process of the data plane, and its CPU per 1,000 held listeners is set beside the',
  "anchor's. HLS: players fetch their session's playlist from serve every 2 s and each new segment once from nginx, in",
  'child processes.',
  '',
  ...results.map(runTable),
  targetsTable(results),
  '',
].join('\n');
console.log(section);
if (!process.env.NO_WRITE_DOCS)
  await writeMarkedSection(join(root, 'docs/benchmarks.md'), 'bench/listener-capacity.ts', section);
