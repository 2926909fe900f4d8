// The data plane in front of Icecast: the front door in serve vs HAProxy (ICECAST_PROXY=haproxy), in
// the same run. For each: a host with S instant-streams of P places, a 64 kbps source on each (raw clients in a
// child process), S × P listeners opened at once from this process and reading their audio, then one more per
// stream (each must be refused); then the listeners held HOLD seconds: CPU of serve, of the proxy (HAProxy's
// process; the front door is inside serve) and of Icecast from /proc, each as a ratio of Icecast's own in the same
// configuration, and the bytes the listeners received against 64 kbps.
// npm run bench:data-plane. Env: DATA_PLANE_STREAMS (20), DATA_PLANE_PLACES (50), DATA_PLANE_HOLD_SECONDS (15),
// DATA_PLANE_PROXIES (front-door,haproxy), NO_WRITE_DOCS=1.
import { spawn, spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { buy } from '../test/support/purchase.js';
import { roomyCatalog, startService, type Service } from '../test/support/service.js';
import { TestWallet } from '../test/support/wallet.js';
import { writeMarkedSection } from './docs.js';
import { percentile } from './percentile.js';
import { pool } from './pool.js';
import { namedTreesCpu, treeCpu } from './process-cpu.js';
import { drain, openListener, stopProcess, waitLive, type OpenListener } from './streaming.js';

const streams = Number(process.env.DATA_PLANE_STREAMS ?? 20);
const places = Number(process.env.DATA_PLANE_PLACES ?? 50);
const HOLD_SECONDS = Number(process.env.DATA_PLANE_HOLD_SECONDS ?? 15);
const root = fileURLToPath(new URL('../', import.meta.url));
const ANSWER_TIMEOUT_MS = 60_000;
const BYTES_PER_SECOND = 8000; // 64 kbps
const signal = AbortSignal.timeout(20 * 60_000);

type Proxy = 'front-door' | 'haproxy';
interface Cpu {
  serve: number;
  proxy: number;
  icecast: number;
  postgres: number;
}

async function cpuNow(pid: number): Promise<Cpu> {
  return {
    serve: (await treeCpu(pid))?.self ?? Number.NaN,
    proxy: (await namedTreesCpu(pid, ['haproxy'])) ?? 0,
    icecast: (await namedTreesCpu(pid, ['icecast2'])) ?? Number.NaN,
    postgres: (await namedTreesCpu(pid, ['postgres'])) ?? Number.NaN,
  };
}

async function listen(url: string): Promise<OpenListener> {
  let timer: NodeJS.Timeout | undefined;
  const none: OpenListener = {
    status: 0,
    error: 'no answer',
    at: performance.now(),
    bytes: () => 0,
    tail: () => Buffer.alloc(0),
    close: () => undefined,
  };
  const timeout = new Promise<OpenListener>((resolve) => {
    timer = setTimeout(() => resolve(none), ANSWER_TIMEOUT_MS);
  });
  const answer = await Promise.race([openListener(url), timeout]);
  clearTimeout(timer);
  return answer;
}

async function startSources(urls: string[]): Promise<{ stop(): Promise<void> }> {
  const mp3 = join(tmpdir(), `data-plane-bench-${process.pid}.mp3`);
  const made = spawnSync('ffmpeg', [
    ...['-nostdin', '-v', 'error', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=20', '-ac', '1'],
    ...['-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '64k', '-write_xing', '0', '-id3v2_version', '0'],
    ...['-f', 'mp3', '-y', mp3],
  ]);
  if (made.status !== 0) throw new Error(`ffmpeg could not make the test MP3: ${made.stderr}`);
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(root, 'bench/streaming-sources.ts'), mp3, String(BYTES_PER_SECOND), ...urls],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stderr!.on('data', (d) => {
    out = (out + d).slice(-4000);
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the sources did not connect within 60 s:\n${out}`)), 60_000);
    child.stdout!.on('data', (d) => {
      if (/^ready (\d+) (\d+)/m.test(String(d))) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => reject(new Error(`the sources child exited with ${code}:\n${out}`)));
  });
  return { stop: () => stopProcess(child) };
}

async function run(proxy: Proxy): Promise<{ row: string }> {
  let service: Service | undefined;
  let sources: { stop(): Promise<void> } | undefined;
  const opened: OpenListener[] = [];
  try {
    service = await startService({
      ICECAST_PROXY: proxy,
      RATE_LIMIT_PER_IP: '0',
      RATE_LIMIT_PER_KEY: '0',
      ICECAST_MAX_SOURCES: String(streams + 10),
      ICECAST_MAX_LISTENERS: String(streams * places + 500),
      ...(await roomyCatalog()),
    });
    const dev = JSON.parse(await readFile(join(service.dataDir, 'dev.json'), 'utf8'));
    const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
    const origin = new URL(service.metricsUrl).origin;
    console.error(`[data-plane] ${proxy}: buying ${streams} instant-streams of ${places} places`);
    const bought = await pool(
      Array.from({ length: streams }, (_, i) => i),
      4,
      async () => {
        const r = await buy(service!, wallet, {
          product_id: 'instant-stream',
          email: 'bench@example.com',
          station_name: 'Bench',
          parameters: { duration_hours: 1, max_listeners: places, bitrate_kbps: 64 },
        });
        if (r.status !== 200) throw new Error(`buying answered ${r.status}: ${JSON.stringify(r.body)}`);
        return r.body.service as { broadcast_url: string; stream_url: string };
      },
    );
    sources = await startSources(bought.map((b) => b.broadcast_url));
    await Promise.all(bought.map((b) => waitLive(b.stream_url, signal)));
    await sleep(2000);
    await drain(origin, signal);

    console.error(`[data-plane] ${proxy}: ${streams * places} listeners at once`);
    const started = performance.now();
    const answers = await Promise.all(
      bought.flatMap((b) => Array.from({ length: places }, () => listen(b.stream_url))),
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
    const extra = await Promise.all(bought.map((b) => listen(b.stream_url)));
    opened.push(...extra);

    await sleep(2000);
    const bytes0 = admitted.map((a) => a.bytes());
    const cpu0 = await cpuNow(service.process.pid!);
    await sleep(HOLD_SECONDS * 1000);
    const cpu1 = await cpuNow(service.process.pid!);
    const rates = admitted.map((a, i) => (a.bytes() - bytes0[i]) / HOLD_SECONDS / BYTES_PER_SECOND);
    const realTime = rates.filter((r) => r >= 0.95).length;
    const core = (k: keyof Cpu) => ((cpu1[k] - cpu0[k]) / HOLD_SECONDS) * 100;
    const icecast = core('icecast');
    const ratio = (k: keyof Cpu) => (icecast > 0 ? `${(core(k) / icecast).toFixed(2)}×` : 'n/a');
    const row =
      `| ${proxy === 'haproxy' ? 'HAProxy (`ICECAST_PROXY=haproxy`)' : 'front door in serve (default)'} | ` +
      `${admitted.length} / ${answers.length} | ` +
      `${
        Object.entries(refused)
          .map(([k, n]) => `${n}× ${k}`)
          .join(', ') || '0'
      } | ${(percentile(times, 0.5) / 1000).toFixed(2)} s | ${(times[times.length - 1] / 1000).toFixed(2)} s | ` +
      `${extra.filter((a) => a.status === 200).length} / ${extra.length} | ${realTime} / ${admitted.length} | ` +
      `${core('serve').toFixed(1)} % (${ratio('serve')}) | ` +
      `${proxy === 'haproxy' ? `${core('proxy').toFixed(1)} % (${ratio('proxy')})` : 'in serve'} | ` +
      `${icecast.toFixed(1)} % | ${core('postgres').toFixed(1)} % |`;
    console.error(row);
    return { row };
  } finally {
    for (const a of opened) a.close();
    await sources?.stop();
    await service?.stop();
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
  '| Data plane | admitted | refused | p50 | last answer | one more per stream admitted | in real time | serve CPU (× Icecast) | proxy CPU (× Icecast) | Icecast CPU | PostgreSQL CPU |',
  '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  ...rows.map((r) => r.row),
  '',
].join('\n');
console.log(section);
if (!process.env.NO_WRITE_DOCS)
  await writeMarkedSection(join(root, 'docs/benchmarks.md'), 'bench/data-plane.ts', section);
