/**
 * HLS at the scale of a host: N players of one stream (bench/hls-players.ts, in child processes of their own), each
 * fetching its session's playlist from serve and the segments from nginx as a player does; serve's and nginx's CPU
 * while they play.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { buy } from '../test/support/purchase.js';
import { copyCatalog, startService, type Service, withoutCapacityReserve } from '../test/support/service.js';
import { startFfmpegSource, waitFor } from '../test/support/streaming.js';
import { TestWallet } from '../test/support/wallet.js';
import type { PlayersReport } from './hls-players.js';
import { hostCpu } from './capacity-planes.js';
import { coresOver } from './listener-hold.js';
import { stopProcess } from './streaming.js';

const PLAYERS_PER_CHILD = 1000;
/** Players start over this long: 100 sessions a second, each admitted by serve (their first playlist). */
const rampSeconds = (players: number) => Math.max(8, Math.ceil(players / 100));

export interface HlsResult {
  players: number;
  report: PlayersReport;
  seconds: number;
  /** % of one core while every player plays. */
  cores: Record<string, number>;
}

/** A copy of the catalog that sells one stream with up to 10,000 places. */
async function oneBigStreamCatalog(): Promise<{ env: Record<string, string>; remove(): Promise<void> }> {
  const catalog = await copyCatalog();
  const file = join(catalog.catalogDir, 'products/instant-stream.yaml');
  await writeFile(file, (await readFile(file, 'utf8')).replaceAll('maximum: 50', 'maximum: 10000'));
  const settings = join(catalog.catalogDir, 'catalog.yaml');
  const roomy = '$1: { live_services: 100000, listener_places: 10000000 }';
  await writeFile(settings, (await readFile(settings, 'utf8')).replace(/(per_key|per_payer): \{[^}]*\}/g, roomy));
  await withoutCapacityReserve(catalog.catalogDir);
  return { env: { CATALOG_DIR: catalog.catalogDir, RULES_DIR: catalog.rulesDir }, remove: catalog.remove };
}

async function buyOne(service: Service, players: number, kbps: number): Promise<{ hls: string; broadcast: string }> {
  const dev = JSON.parse(await readFile(join(service.dataDir, 'dev.json'), 'utf8'));
  const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const bought = await buy(service, wallet, {
    product_id: 'instant-stream',
    email: 'bench@example.com',
    station_name: 'Bench FM',
    // One place more for the warm-up's session, until it idles out.
    parameters: { duration_hours: 1, max_listeners: players + 1, bitrate_kbps: kbps },
  });
  if (bought.status !== 200) throw new Error(JSON.stringify(bought.body));
  return { hls: bought.body.service.endpoints.hls_url, broadcast: bought.body.service.broadcast_url };
}

function startPlayers(root: string, hls: string, count: number, ramp: number, until: number): Promise<PlayersReport> {
  const child: ChildProcess = spawn(
    process.execPath,
    ['--import', 'tsx', join(root, 'bench/hls-players.ts'), hls, String(count), String(ramp), String(until)],
    { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout!.on('data', (d) => {
    out += d;
  });
  return new Promise((resolve, reject) =>
    child.once('exit', (code) => {
      if (code === 0) resolve(JSON.parse(out.trim().split('\n').at(-1)!));
      else reject(new Error(`hls-players exited with ${code}`));
    }),
  ).finally(() => stopProcess(child)) as Promise<PlayersReport>;
}

function sum(reports: PlayersReport[]): PlayersReport {
  const keys = ['players', 'playing', 'segments', 'bytes', 'failures', 'retries'] as const;
  return Object.fromEntries(keys.map((k) => [k, reports.reduce((n, r) => n + r[k], 0)])) as unknown as PlayersReport;
}

export async function measureHls(root: string, players: number, seconds: number, kbps: number): Promise<HlsResult> {
  const catalog = await oneBigStreamCatalog();
  let service: Service | undefined;
  let source: ChildProcess | undefined;
  try {
    service = await startService({
      ...catalog.env,
      RATE_LIMIT_PER_IP: '0',
      RATE_LIMIT_PER_KEY: '0',
      // The host's listener places bound what the deployment sells (5,000 by default).
      ICECAST_MAX_LISTENERS: String(players + 500),
    });
    const stream = await buyOne(service, players, kbps);
    source = startFfmpegSource(stream.broadcast, kbps);
    const master = await (await fetch(stream.hls)).text();
    const media = new URL(master.split('\n').find((l) => l.includes('live.m3u8?session='))!, stream.hls);
    await waitFor('the rendition', async () => (await fetch(media)).status === 200, 60_000);
    const ramp = rampSeconds(players);
    const until = Date.now() + (ramp + 12 + seconds + 4) * 1000;
    const children = Math.ceil(players / PLAYERS_PER_CHILD);
    const reports = Array.from({ length: children }, (_, i) =>
      startPlayers(root, stream.hls, Math.floor(players / children) + (i < players % children ? 1 : 0), ramp, until),
    );
    await sleep((ramp + 12) * 1000);
    const { cores, seconds: window } = await coresOver(hostCpu(service.process.pid!), seconds);
    return { players, report: sum(await Promise.all(reports)), seconds: window, cores };
  } finally {
    source?.kill('SIGKILL');
    await service?.stop();
    await catalog.remove();
  }
}
