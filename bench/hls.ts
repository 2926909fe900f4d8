// HLS capacity on this machine (npm run bench:hls): the CPU of one rendition, how many concurrent HLS listeners of
// one 128 kbps stream serve keeps in real time, per core of its own CPU, and the listen page's time to first sound
// in Chromium. Writes its section of docs/benchmarks.md.
// Env: HLS_LISTENERS (500), SECONDS (60, the measured window), NO_WRITE_DOCS=1.
import type { ChildProcess } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { buy } from '../test/support/purchase.js';
import { copyCatalog, startService, type Service } from '../test/support/service.js';
import { startFfmpegSource, waitFor } from '../test/support/streaming.js';
import { TestWallet } from '../test/support/wallet.js';
import { writeMarkedSection } from './docs.js';
import { CdnEdge } from './hls-cdn.js';
import { timesToFirstSound } from './first-sound.js';
import { Player } from './hls-player.js';
import { namedTreesCpu, treeCpu } from './process-cpu.js';

const listeners = Number(process.env.HLS_LISTENERS ?? 500);
const seconds = Number(process.env.SECONDS ?? 60);
const root = fileURLToPath(new URL('../', import.meta.url));

/** The segmenter's ffmpeg (below serve, writing into DATA_DIR/hls). */
async function segmenterPid(dataDir: string): Promise<number> {
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const args = await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    if (args.startsWith('ffmpeg') && args.includes(join(dataDir, 'hls'))) return Number(name);
  }
  throw new Error('no HLS segmenter running');
}

/** nginx serving this service's segments (src/provisioning/hls-file-server.ts), if it runs. */
async function segmentServerPid(dataDir: string): Promise<number | undefined> {
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const args = await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    if (args.startsWith('nginx') && args.includes(join(dataDir, 'hls-file-server'))) return Number(name);
  }
  return undefined;
}

async function cpuOf(pid: number): Promise<number> {
  return (await treeCpu(pid))?.self ?? NaN;
}

/** The newest segment's number, from the rendition's own playlist file (read without taking a listener place). */
async function newestSegment(dir: string): Promise<number> {
  const playlist = await readFile(join(dir, 'live.m3u8'), 'utf8');
  const numbers = [...playlist.matchAll(/^seg(\d+)\.ts$/gm)].map((m) => Number(m[1]));
  return Math.max(...numbers);
}

let service: Service | undefined;
let source: ChildProcess | undefined;
const catalog = await copyCatalog();
try {
  // One stream for many listeners: this copy of the catalog sells up to 10 000 places on one stream.
  const file = join(catalog.catalogDir, 'products/instant-stream.yaml');
  await writeFile(file, (await readFile(file, 'utf8')).replaceAll('maximum: 50', 'maximum: 10000'));
  const settings = join(catalog.catalogDir, 'catalog.yaml');
  const roomy = '$1: { live_services: 100000, listener_places: 10000000 }';
  await writeFile(settings, (await readFile(settings, 'utf8')).replace(/(per_key|per_payer): \{[^}]*\}/g, roomy));
  service = await startService({
    CATALOG_DIR: catalog.catalogDir,
    RULES_DIR: catalog.rulesDir,
    RATE_LIMIT_PER_IP: '0',
    RATE_LIMIT_PER_KEY: '0',
  });
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
  source = startFfmpegSource(svc.broadcast_url, 128);
  const hlsUrl: string = svc.endpoints.hls_url;
  const warmUp = new URL(
    (await (await fetch(hlsUrl)).text()).split('\n').find((l) => l.startsWith('live.m3u8'))!,
    hlsUrl,
  );
  await waitFor('the rendition', async () => (await fetch(warmUp)).status === 200, 60_000);
  const segmenter = await segmenterPid(service.dataDir);
  const nginx = await segmentServerPid(service.dataDir);
  const nginxCpu = async () => (nginx ? await cpuOf(nginx) : 0);

  // 1. One rendition and serve without HLS listeners (the warm-up session above has idled out).
  await sleep(10_000);
  const [f0, s0, t0] = [await cpuOf(segmenter), await cpuOf(service.process.pid!), Date.now()];
  await sleep(30_000);
  const idleWindow = (Date.now() - t0) / 1000;
  const renditionCores = ((await cpuOf(segmenter)) - f0) / idleWindow;
  const serveIdleCores = ((await cpuOf(service.process.pid!)) - s0) / idleWindow;

  // 2. N players, started over 8 s; measured over `seconds` once all are in.
  const players = Array.from({ length: listeners }, () => new Player(hlsUrl));
  const until = Date.now() + 20_000 + seconds * 1000 + 4000;
  const running = players.map(async (p, i) => {
    await sleep((i / listeners) * 8000);
    await p.run(until);
  });
  await sleep(20_000);
  const renditionDir = join(service.dataDir, 'hls', svc.service_id);
  const servePid = service.process.pid!;
  const sample = async () => [
    await newestSegment(renditionDir),
    await cpuOf(servePid),
    (await namedTreesCpu(servePid, ['postgres'])) ?? NaN,
    await cpuOf(segmenter),
    await nginxCpu(),
    Date.now(),
  ];
  const [firstSeq, serveCpu0, pgCpu0, ffCpu0, nginxCpu0, w0] = await sample();
  await sleep(seconds * 1000);
  const [lastSeq, serveCpu1, pgCpu1, ffCpu1, nginxCpu1, w1] = await sample();
  await Promise.all(running);
  const window = (w1 - w0) / 1000;
  const produced = lastSeq - firstSeq;
  // A player kept real time when it got ≥ 95 % of the segments the rendition made in the window (from its first one,
  // if its admission came late on a loaded machine: that is start-up time, counted apart).
  const startOf = (p: Player) => Math.max(firstSeq, Math.min(...p.fetched));
  const late = players.filter((p) => startOf(p) > firstSeq).length;
  const kept = players.map((p) => {
    const got = [...p.fetched].filter((n) => n >= startOf(p) && n < lastSeq).length;
    return got / Math.max(1, lastSeq - startOf(p));
  });
  const inRealTime = kept.filter((k) => k >= 0.95).length;
  const serveCores = (serveCpu1 - serveCpu0) / window;
  const pgCores = (pgCpu1 - pgCpu0) / window;
  const nginxCores = (nginxCpu1 - nginxCpu0) / window;
  const failures = players.reduce((n, p) => n + p.failures, 0);
  const retries = players.reduce((n, p) => n + p.retries, 0);
  const mbps = (players.reduce((n, p) => n + p.bytes, 0) * 8) / 1e6 / (seconds + 24);
  // 2b. As many players again through a CDN edge (bench/hls-cdn.ts) in front of nginx, as HLS_PUBLIC_URL puts one:
  // serve answers their playlists, the edge their segments (each fetched from nginx once). The first players' places
  // are freed first (8 s without a fetch).
  await sleep(10_000);
  const segmentOrigin = new URL(segmentAddressOf(players)).origin;
  const edge = new CdnEdge(segmentOrigin);
  const edgeBase = new URL(await edge.start());
  const viaEdge = Array.from(
    { length: listeners },
    () => new Player(hlsUrl, (url) => new URL(url.pathname, url.origin === segmentOrigin ? edgeBase : url)),
  );
  const edgeUntil = Date.now() + 20_000 + seconds * 1000 + 4000;
  const edgeRunning = viaEdge.map(async (p, i) => {
    await sleep((i / listeners) * 8000);
    await p.run(edgeUntil);
  });
  await sleep(20_000);
  const [e0, en0, ew0] = [await cpuOf(servePid), await nginxCpu(), Date.now()];
  await sleep(seconds * 1000);
  const edgeWindow = (Date.now() - ew0) / 1000;
  const edgeServeCores = ((await cpuOf(servePid)) - e0) / edgeWindow;
  const edgeNginxCores = ((await nginxCpu()) - en0) / edgeWindow;
  await Promise.all(edgeRunning);
  await edge.stop();
  const edgeFailures = viaEdge.reduce((n, p) => n + p.failures, 0);
  const edgeSegments = viaEdge.reduce((n, p) => n + p.fetched.size, 0);
  // 3. The listen page in Chromium, the rendition running (the players above have gone): click to first sound.
  // A failure here (a browser timing out on a loaded machine) is reported in its row, not in place of the figures.
  const firstSound = await timesToFirstSound(svc.endpoints.listen_page, 5).then(
    (times) => times.sort((a, b) => a - b),
    (err: Error) => err,
  );

  const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
  const section = [
    '## HLS: CPU per rendition, listeners per core (`npm run bench:hls`)',
    '',
    `Machine: ${availableParallelism()} cores, load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} at the end`,
    '(shared with other work: CPU seconds, not wall time, are the measure). One instant-stream at 128 kbps fed by',
    "ffmpeg; its rendition (MP3 decode, AAC encode, ffmpeg's HLS muxer, 4 s MPEG-TS segments); players fetch their",
    "session's playlist every 2 s and each new segment once, from this machine, over loopback.",
    '',
    '| measure | value |',
    '|:--|--:|',
    `| CPU of one rendition (its ffmpeg, ${idleWindow.toFixed(0)} s) | ${pct(renditionCores)} of one core |`,
    `| serve's CPU without HLS listeners | ${pct(serveIdleCores)} of one core |`,
    `| HLS listeners (one stream, ${window.toFixed(0)} s measured) | ${listeners} |`,
    `| … in real time (got ≥ 95 % of the ${produced} segments made meanwhile, from their first) | ` +
      `${inRealTime} (${pct(inRealTime / listeners)}) |`,
    `| … of which admitted after the window began (loaded machine) | ${late} |`,
    `| serve's CPU with them (node: playlists only) | ${pct(serveCores)} of one core |`,
    `| nginx's CPU with them (every segment) | ${nginx ? `${pct(nginxCores)} of one core` : 'not installed'} |`,
    `| PostgreSQL's CPU meanwhile | ${pct(pgCores)} of one core |`,
    `| rendition's CPU with them | ${pct((ffCpu1 - ffCpu0) / window)} of one core |`,
    `| HLS listeners per core of serve (listeners ÷ serve's cores) | ${Math.round(listeners / serveCores)} |`,
    `| … of serve and PostgreSQL together | ${Math.round(listeners / (serveCores + pgCores))} |`,
    `| serve's and nginx's CPU with as many players through a CDN edge in front of nginx | ` +
      `${pct(edgeServeCores)} and ${pct(edgeNginxCores)} of one core; ` +
      `${edge.originFetches} segment requests reached nginx for ${edgeSegments} segments played, ${edgeFailures} failed polls |`,
    `| sent to players | ${mbps.toFixed(1)} Mbit/s; ${failures} failed polls; ` +
      `${retries} admissions retried (retryable 503) |`,
    `| listen page, click to first sound in Chromium (HLS, 5 new profiles): median (min–max) | ` +
      (firstSound instanceof Error
        ? `failed: ${firstSound.message.split('\n')[0]} |`
        : `${Math.round(firstSound[2])} ms (${Math.round(firstSound[0])}–${Math.round(firstSound[4])}) |`),
    '',
  ].join('\n');
  console.log(section);
  if (!process.env.NO_WRITE_DOCS) await writeMarkedSection(join(root, 'docs/benchmarks.md'), 'bench/hls.ts', section);
} finally {
  source?.kill('SIGKILL');
  await service?.stop();
  await catalog.remove();
}

/** A segment address some player was given (nginx's, when it serves them). */
function segmentAddressOf(players: Player[]): string {
  const address = players.map((p) => p.lastSegment).find((a) => a);
  if (!address) throw new Error('no player fetched a segment');
  return address;
}
