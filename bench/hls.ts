// HLS capacity on this machine (npm run bench:hls): the CPU of one rendition; N HLS players of one 128 kbps stream
// (in child processes, bench/hls-fleet.ts), how many keep real time, serve's CPU per 1,000 playlists fetched and
// nginx's per 1,000 requests, extrapolated to 5,000 players; as many again through a CDN edge; the listen page's
// time to first sound in Chromium. Writes its section of docs/benchmarks.md.
// npm run bench:hls -- [--players 500] [--seconds 60] [--no-edge] [--no-first-sound] [--cpu-prof DIR]
// (HLS_LISTENERS and SECONDS still set the first two; NO_WRITE_DOCS=1 leaves the docs alone.)
import type { ChildProcess } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { buy } from '../test/support/purchase.js';
import { copyCatalog, startService, withoutCapacityReserve, type Service } from '../test/support/service.js';
import { startFfmpegSource, waitFor } from '../test/support/streaming.js';
import { TestWallet } from '../test/support/wallet.js';
import { writeMarkedSection } from './docs.js';
import { CdnEdge } from './hls-cdn.js';
import { PlayerFleet } from './hls-fleet.js';
import { hlsSection, type EdgeFigures, type HlsFigures } from './hls-report.js';
import { cpuOf, newestSegment, segmenterPid, segmentServerPid } from './hls-processes.js';
import { timesToFirstSound } from './first-sound.js';
import { namedTreesCpu } from './process-cpu.js';

const { values: flags } = parseArgs({
  options: {
    players: { type: 'string', default: process.env.HLS_LISTENERS ?? '500' },
    seconds: { type: 'string', default: process.env.SECONDS ?? '60' },
    'no-edge': { type: 'boolean', default: false },
    'no-first-sound': { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
  },
});
const listeners = Number(flags.players);
const seconds = Number(flags.seconds);
const root = fileURLToPath(new URL('../', import.meta.url));
/** Players start over this long (about 200 admissions a second), then the window waits as long again to settle. */
const rampSeconds = Math.max(8, Math.ceil(listeners / 200));
const settleMs = (rampSeconds + 12) * 1000;

interface Run {
  service: Service;
  hlsUrl: string;
  listenPage: string;
  renditionDir: string;
  segmenter: number;
  nginx?: number;
}

/** A copy of the catalog that sells up to 10,000 places on one stream, and serve on it (profiled if asked). */
async function startBenchService(catalogDir: string, rulesDir: string): Promise<Service> {
  const file = join(catalogDir, 'products/instant-stream.yaml');
  await writeFile(file, (await readFile(file, 'utf8')).replaceAll('maximum: 50', 'maximum: 10000'));
  const settings = join(catalogDir, 'catalog.yaml');
  const roomy = '$1: { live_services: 100000, listener_places: 10000000 }';
  await writeFile(settings, (await readFile(settings, 'utf8')).replace(/(per_key|per_payer): \{[^}]*\}/g, roomy));
  // One wallet without paid history buys the whole host's places.
  await withoutCapacityReserve(catalogDir);
  const profile = flags['cpu-prof'];
  if (profile) await mkdir(profile, { recursive: true });
  return startService({
    CATALOG_DIR: catalogDir,
    RULES_DIR: rulesDir,
    RATE_LIMIT_PER_IP: '0',
    RATE_LIMIT_PER_KEY: '0',
    ...(profile && {
      NODE_OPTIONS: `--import=${join(root, 'bench/hls-cpu-profile.mjs')}`,
      HLS_BENCH_CPU_PROF_DIR: profile,
    }),
  });
}

/** Buys the stream, feeds it and waits for its rendition (started by one session, which then idles out). */
async function prepare(service: Service): Promise<{ run: Run; source: ChildProcess }> {
  const dev = JSON.parse(await readFile(join(service.dataDir, 'dev.json'), 'utf8'));
  const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const bought = await buy(service, wallet, {
    product_id: 'instant-stream',
    email: 'bench@example.com',
    station_name: 'Bench FM',
    parameters: { duration_hours: 1, max_listeners: listeners, bitrate_kbps: 128 },
  });
  if (bought.status !== 200) throw new Error(JSON.stringify(bought.body));
  const svc = bought.body.service;
  const source = startFfmpegSource(svc.broadcast_url, 128);
  const hlsUrl: string = svc.endpoints.hls_url;
  const master = await (await fetch(hlsUrl)).text();
  const warmUp = new URL(master.split('\n').find((l) => l.includes('live.m3u8?session='))!, hlsUrl);
  await waitFor('the rendition', async () => (await fetch(warmUp)).status === 200, 60_000);
  const run: Run = {
    service,
    hlsUrl,
    listenPage: svc.endpoints.listen_page,
    renditionDir: join(service.dataDir, 'hls', svc.service_id),
    segmenter: await segmenterPid(service.dataDir),
    nginx: await segmentServerPid(service.dataDir),
  };
  return { run, source };
}

/** The rendition and serve without HLS listeners (the warm-up session idles out first). */
async function idle(run: Run): Promise<{ window: number; rendition: number; serve: number }> {
  await sleep(10_000);
  const [f0, s0, t0] = [await cpuOf(run.segmenter), await cpuOf(run.service.process.pid!), Date.now()];
  await sleep(30_000);
  const window = (Date.now() - t0) / 1000;
  const rendition = ((await cpuOf(run.segmenter)) - f0) / window;
  return { window, rendition, serve: ((await cpuOf(run.service.process.pid!)) - s0) / window };
}

/** Every process's CPU seconds so far, the newest segment, the players' counters and the time. */
async function sample(run: Run, fleet: PlayerFleet) {
  const servePid = run.service.process.pid!;
  return {
    seq: await newestSegment(run.renditionDir),
    serve: await cpuOf(servePid),
    pg: (await namedTreesCpu(servePid, ['postgres'])) ?? NaN,
    rendition: await cpuOf(run.segmenter),
    nginx: run.nginx ? await cpuOf(run.nginx) : 0,
    players: await fleet.sample(),
    at: Date.now(),
  };
}

/** N players, measured over `seconds` once all are in; serve profiled over that window when asked. */
async function measurePlayers(run: Run, segmentsVia?: { origin: string; base: string }): Promise<HlsFigures> {
  const fleet = new PlayerFleet({ root, hlsUrl: run.hlsUrl, players: listeners, rampSeconds, segmentsVia });
  try {
    await fleet.start();
    await sleep(settleMs);
    const profiling = !segmentsVia && flags['cpu-prof'];
    if (profiling) run.service.process.kill('SIGUSR2');
    const a = await sample(run, fleet);
    await sleep(seconds * 1000);
    const b = await sample(run, fleet);
    if (profiling) run.service.process.kill('SIGUSR2');
    const { players, lastSegment } = await fleet.done();
    const window = (b.at - a.at) / 1000;
    return {
      listeners,
      window,
      firstSeq: a.seq,
      lastSeq: b.seq,
      players,
      lastSegment,
      playlists: b.players.playlists - a.players.playlists,
      segments: b.players.segments - a.players.segments,
      bytes: b.players.bytes - a.players.bytes,
      serveCpu: b.serve - a.serve,
      pgCpu: b.pg - a.pg,
      renditionCpu: b.rendition - a.rendition,
      nginxCpu: b.nginx - a.nginx,
      nginx: run.nginx !== undefined,
    };
  } finally {
    fleet.stop();
  }
}

/** As many players again through a CDN edge (bench/hls-cdn.ts) in front of nginx, as HLS_PUBLIC_URL puts one. */
async function throughEdge(run: Run, direct: HlsFigures): Promise<EdgeFigures> {
  // The first players' places are freed first (8 s without a fetch).
  await sleep(10_000);
  if (!direct.lastSegment) throw new Error('no player fetched a segment');
  const origin = new URL(direct.lastSegment).origin;
  const edge = new CdnEdge(origin);
  const base = await edge.start();
  try {
    const figures = await measurePlayers(run, { origin, base });
    return { ...figures, originFetches: edge.originFetches };
  } finally {
    await edge.stop();
  }
}

let service: Service | undefined;
let source: ChildProcess | undefined;
const catalog = await copyCatalog();
try {
  service = await startBenchService(catalog.catalogDir, catalog.rulesDir);
  const prepared = await prepare(service);
  source = prepared.source;
  const { run } = prepared;
  const quiet = await idle(run);
  const direct = await measurePlayers(run);
  const edge = flags['no-edge'] ? undefined : await throughEdge(run, direct);
  // The listen page in Chromium, the rendition running (the players above have gone): click to first sound. A
  // failure (a browser timing out on a loaded machine) is reported in its row, not in place of the figures.
  const firstSound = flags['no-first-sound']
    ? undefined
    : await timesToFirstSound(run.listenPage, 5).then(
        (times) => times.sort((a, b) => a - b),
        (err: Error) => err,
      );
  const machine = `${availableParallelism()} cores, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')} at the end`;
  const section = hlsSection({ machine, quiet, direct, edge, firstSound });
  console.log(section);
  if (!process.env.NO_WRITE_DOCS) await writeMarkedSection(join(root, 'docs/benchmarks.md'), 'bench/hls.ts', section);
} finally {
  source?.kill('SIGKILL');
  await service?.stop();
  await catalog.remove();
}
