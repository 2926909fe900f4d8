/**
 * The streaming benchmark, on the service that bench/run.ts started (its Icecast 2.4.4 child, embedded PostgreSQL):
 *  1. Icecast URL-auth callback throughput, end to end: source admissions/s (a raw source client, bench/icecast-source.ts,
 *     connecting and disconnecting, one mount at a time and several in parallel) and listener admissions/s (N listeners
 *     opened at once on a mount bought with max_listeners 50: admitted and refused answers both count), with the service's
 *     own time per callback from /metrics (route /internal/icecast/:action).
 *  2. Concurrent mounts with listeners: K bought instant-streams, a 64 kbps source on each (raw clients replaying an MP3 at
 *     real-time pace, in a child process: bench/streaming-sources.ts), 5 listeners each, held while the life-cycle worker
 *     runs; CPU and memory of the service, Icecast, PostgreSQL, the sources and the listeners (this process) from /proc.
 *  3. A restart: sources on the first K mounts, serve stopped (SIGINT) and started again on the same DATA_DIR, the
 *     sources reconnect to the broadcast URLs bought before it; mounts live before and after, by their listen URLs.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFile, readdir } from 'node:fs/promises';
import http from 'node:http';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Service } from '../test/support/service.js';
import { buy } from '../test/support/purchase.js';
import { hasMpegFrame } from '../test/support/streaming.js';
import { TestWallet } from '../test/support/wallet.js';
import { connectSource, mp3FrameOffsets, pumpSource, sourceTarget } from './icecast-source.js';
import { percentile } from './percentile.js';
import { pool } from './pool.js';

export interface StreamingOptions {
  root: string;
  service: Service;
  signal: AbortSignal;
  log: (line: string) => void;
  scratch: string;
  /** Mount counts for part 2, e.g. [20, 40]. */
  points: number[];
  listenersPerMount: number;
  holdSeconds: number;
  /** Listeners opened at once in part 1, on a mount bought with `listenerCap` max_listeners. */
  listenerBurst: number;
  listenerCap: number;
  /** Seconds of connect/disconnect per source-admission case. */
  sourceSeconds: number;
  /** Mounts cycled in parallel in the second source-admission case. */
  sourceParallel: number;
  /** Stops the service and starts it again on the same DATA_DIR (part 3); absent: no restart. */
  restart?: () => Promise<Service>;
}

export interface CallbackStats {
  count: number;
  meanMs: number;
}
export interface AdmissionRun {
  label: string;
  answers: number;
  admitted: number;
  refused: Record<string, number>;
  seconds: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  service: CallbackStats;
}
export interface Usage {
  cpu: number;
  memMb: number;
  processes: number;
}
export interface MountsPoint {
  mounts: number;
  sourcesAdmitted: number;
  listeners: number;
  listenersAdmitted: number;
  attachSeconds: number;
  holdSeconds: number;
  receiving: number;
  minKBps: number;
  medianKBps: number;
  stalled: number;
  sourcesClosed: number;
  usage: Record<'service' | 'icecast' | 'postgres' | 'sources' | 'listeners' | 'other', Usage>;
  callbacks: CallbackStats;
}
export interface RestartRun {
  mounts: number;
  liveBefore: number;
  /** Services whose GET /services/{id} still shows the stream and broadcast URLs of before the restart. */
  sameUrls: number;
  liveAfter: number;
  /** From the stop signal until the new serve answers. */
  restartSeconds: number;
  /** From the new serve answering until the last mount was live again through its old URLs. */
  backSeconds: number;
}
export interface StreamingResults {
  sources: AdmissionRun[];
  listeners: AdmissionRun;
  points: MountsPoint[];
  restart?: RestartRun;
  icecastVersion: string;
}

interface Bought {
  broadcast_url: string;
  stream_url: string;
  service_id: string;
}

const BYTES_PER_SECOND = 8000; // 64 kbps

export async function runStreamingBench(o: StreamingOptions): Promise<StreamingResults> {
  const dev = JSON.parse(await readFile(join(o.service.dataDir, 'dev.json'), 'utf8')) as {
    buyer: { private_key: `0x${string}` };
    chain: { rpc_url: string };
  };
  const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const origin = new URL(o.service.metricsUrl).origin; // the metrics listener
  const icecastVersion = spawnSync('icecast2', ['-v']).stdout?.toString().trim() || 'icecast2';
  const cleanup: Array<() => void | Promise<unknown>> = [];
  try {
    // An MP3 at 64 kbps CBR, no ID3/Xing, so the replay can loop on frame boundaries.
    const mp3 = join(o.scratch, 'bench-64k.mp3');
    const made = spawnSync('ffmpeg', [
      '-nostdin',
      '-v',
      'error',
      '-f',
      'lavfi',
      '-i',
      'sine=frequency=440:duration=20',
      '-ac',
      '1',
      '-ar',
      '44100',
      '-c:a',
      'libmp3lame',
      '-b:a',
      '64k',
      '-write_xing',
      '0',
      '-id3v2_version',
      '0',
      '-f',
      'mp3',
      '-y',
      mp3,
    ]);
    if (made.status !== 0) throw new Error(`ffmpeg could not make the test MP3: ${made.stderr}`);
    const bytes = await readFile(mp3);
    const frames = mp3FrameOffsets(bytes);

    const maxMounts = Math.max(o.sourceParallel, ...o.points);
    o.log(
      `streaming: buying 1 instant-stream with max_listeners ${o.listenerCap} and ${maxMounts} with max_listeners ${o.listenersPerMount} (64 kbps)`,
    );
    const purchase = async (maxListeners: number): Promise<Bought> => {
      o.signal.throwIfAborted();
      const r = await buy(o.service, wallet, {
        product_id: 'instant-stream',
        email: 'bench@example.com',
        station_name: 'Bench',
        parameters: { duration_hours: 1, max_listeners: maxListeners, bitrate_kbps: 64 },
      });
      if (r.status !== 200) throw new Error(`buying an instant-stream answered ${r.status}: ${JSON.stringify(r.body)}`);
      return r.body.service as Bought;
    };
    const wide = await purchase(o.listenerCap);
    const mounts = await pool(
      Array.from({ length: maxMounts }, (_, i) => i),
      4,
      () => purchase(o.listenersPerMount),
    );

    // ---- 1a. source admissions --------------------------------------------------------------------------------------
    const sources: AdmissionRun[] = [];
    for (const parallel of [...new Set([1, o.sourceParallel])]) {
      o.signal.throwIfAborted();
      o.log(`  source admissions: connect + disconnect for ${o.sourceSeconds} s on ${parallel} mount(s) in parallel`);
      const before = await callbackMetrics(origin);
      const latencies: number[] = [];
      const refused: Record<string, number> = {};
      let admitted = 0;
      const started = performance.now();
      const until = started + o.sourceSeconds * 1000;
      await Promise.all(
        mounts.slice(0, parallel).map(async (m) => {
          const target = sourceTarget(m.broadcast_url);
          while (performance.now() < until) {
            o.signal.throwIfAborted();
            const c = await connectSource(target);
            c.socket.destroy();
            latencies.push(c.ms);
            if (c.admitted) admitted++;
            else refused[c.statusLine || 'closed'] = (refused[c.statusLine || 'closed'] ?? 0) + 1;
          }
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      const drained = await drain(origin, o.signal); // Icecast's queue of mount_add / mount_remove callbacks
      o.log(
        `    ${latencies.length} answers in ${seconds.toFixed(1)} s; Icecast's callback queue drained ${drained.toFixed(1)} s later`,
      );
      sources.push(
        admissionRun(
          `source PUT, ${parallel} mount${parallel > 1 ? 's' : ''} in parallel`,
          latencies,
          admitted,
          refused,
          seconds,
          diff(before, await callbackMetrics(origin)),
        ),
      );
    }

    // ---- 1b. listener admissions ------------------------------------------------------------------------------------
    o.log(`  listener admissions: ${o.listenerBurst} listeners at once on a mount with max_listeners ${o.listenerCap}`);
    const wideSource = await connectSource(sourceTarget(wide.broadcast_url), 30_000);
    if (!wideSource.admitted) throw new Error(`the source for the listener test was refused: ${wideSource.statusLine}`);
    wideSource.socket.on('error', () => undefined);
    const stopWide = pumpSource(wideSource.socket, bytes, frames, BYTES_PER_SECOND);
    cleanup.push(() => {
      stopWide();
      wideSource.socket.destroy();
    });
    await waitLive(wide.stream_url, o.signal);
    await sleep(1500); // the probe's listener_remove
    const lBefore = await callbackMetrics(origin);
    const lStarted = performance.now();
    const answers = await Promise.all(Array.from({ length: o.listenerBurst }, () => openListener(wide.stream_url)));
    const lSeconds = (Math.max(...answers.map((a) => a.at)) - lStarted) / 1000;
    const lMetrics = diff(lBefore, await callbackMetrics(origin));
    for (const a of answers) a.close();
    o.log(
      `    ${answers.length} answers in ${lSeconds.toFixed(2)} s, ${answers.filter((a) => a.status === 200).length} admitted`,
    );
    const lRefused: Record<string, number> = {};
    for (const a of answers)
      if (a.status !== 200)
        lRefused[a.status ? String(a.status) : `error ${a.error}`] =
          (lRefused[a.status ? String(a.status) : `error ${a.error}`] ?? 0) + 1;
    const listeners = admissionRun(
      `listener GET, ${o.listenerBurst} at once, max_listeners ${o.listenerCap}`,
      answers.map((a) => a.at - lStarted),
      answers.filter((a) => a.status === 200).length,
      lRefused,
      lSeconds,
      lMetrics,
    );
    stopWide();
    wideSource.socket.destroy();
    await sleep(1500);

    // ---- 2. concurrent mounts with listeners -----------------------------------------------------------------------
    const points: MountsPoint[] = [];
    for (const k of o.points) {
      o.signal.throwIfAborted();
      o.log(
        `  ${k} mounts: ${k} raw sources at 64 kbps (child process), ${k * o.listenersPerMount} listeners, hold ${o.holdSeconds} s`,
      );
      const child = spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          join(o.root, 'bench/streaming-sources.ts'),
          mp3,
          String(BYTES_PER_SECOND),
          ...mounts.slice(0, k).map((m) => m.broadcast_url),
        ],
        { cwd: o.root, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      const stopChild = () => stopProcess(child);
      cleanup.push(stopChild);
      let childOut = '';
      let sourcesClosed = 0;
      child.stderr!.on('data', (d) => {
        childOut = (childOut + d).slice(-4000);
      });
      const ready = await new Promise<{ admitted: number; refused: number }>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`the sources did not connect within 30 s:\n${childOut}`)),
          30_000,
        );
        child.stdout!.on('data', (d) => {
          for (const line of String(d).split('\n')) {
            const r = /^ready (\d+) (\d+)/.exec(line);
            if (r) {
              clearTimeout(timer);
              resolve({ admitted: Number(r[1]), refused: Number(r[2]) });
            }
            const c = /closed (\d+)/.exec(line);
            if (c) sourcesClosed = Number(c[1]);
          }
        });
        child.once('exit', (code) => {
          clearTimeout(timer);
          reject(new Error(`the sources child exited with ${code}:\n${childOut}`));
        });
      });
      if (ready.refused) o.log(`  warning: ${ready.refused} of ${k} sources refused`);
      await Promise.all(mounts.slice(0, k).map((m) => waitLive(m.stream_url, o.signal)));
      await sleep(1500); // the probes' listener_remove
      const cBefore = await callbackMetrics(origin);
      const aStarted = performance.now();
      // Opened a few at a time, as for the sources: a burst beyond Icecast's listen backlog only measures SYN retries.
      const attached = await pool(
        mounts.slice(0, k).flatMap((m) => Array.from({ length: o.listenersPerMount }, () => m.stream_url)),
        8,
        openListener,
      );
      const attachSeconds = (Math.max(...attached.map((a) => a.at)) - aStarted) / 1000;
      const callbacks = diff(cBefore, await callbackMetrics(origin));
      cleanup.push(() => {
        for (const a of attached) a.close();
      });
      const live = attached.filter((a) => a.status === 200);
      await sleep(2000); // past the 64 kB burst-on-connect
      const tree0 = await sampleTree(o.service.process.pid!, child.pid!);
      const t0 = performance.now();
      const history = live.map((a) => [a.bytes()]);
      for (let s = 0; s < o.holdSeconds; s++) {
        await sleep(1000, undefined, { signal: o.signal });
        live.forEach((a, i) => history[i].push(a.bytes()));
      }
      const tree1 = await sampleTree(o.service.process.pid!, child.pid!);
      const held = (performance.now() - t0) / 1000;
      const rates = history.map((h) => (h[h.length - 1] - h[0]) / held / 1000);
      // A stall: a listener that got nothing over 2 consecutive seconds.
      const stalled = history.filter((h) => h.some((v, i) => i >= 2 && v === h[i - 2])).length;
      const receiving = live.filter(
        (a, i) => hasMpegFrame(a.tail()) && rates[i] >= (0.9 * BYTES_PER_SECOND) / 1000,
      ).length;
      const sorted = Float64Array.from(rates).sort();
      points.push({
        mounts: k,
        sourcesAdmitted: ready.admitted,
        listeners: attached.length,
        listenersAdmitted: live.length,
        attachSeconds,
        holdSeconds: held,
        receiving,
        minKBps: sorted.length ? sorted[0] : 0,
        medianKBps: percentile(sorted, 0.5),
        stalled,
        sourcesClosed,
        usage: usage(tree0, tree1, held),
        callbacks,
      });
      for (const a of attached) a.close();
      await stopChild();
      await sleep(1500); // mount_remove and listener_remove callbacks
    }

    // ---- 3. a restart -------------------------------------------------------------------------------------------
    let restart: RestartRun | undefined;
    if (o.restart) {
      const k = Math.min(o.points[0] ?? 0, mounts.length);
      const onRestart = mounts.slice(0, k);
      o.log(
        `  restart: ${k} mounts with sources, serve stopped (SIGINT) and started again, sources reconnect to the same URLs`,
      );
      const feed = async () => {
        const child = spawn(
          process.execPath,
          [
            '--import',
            'tsx',
            join(o.root, 'bench/streaming-sources.ts'),
            mp3,
            String(BYTES_PER_SECOND),
            ...onRestart.map((m) => m.broadcast_url),
          ],
          { cwd: o.root, stdio: ['ignore', 'pipe', 'ignore'] },
        );
        cleanup.push(() => stopProcess(child));
        await new Promise<void>((resolve) => {
          child.stdout!.on('data', (d) => {
            if (/^ready /m.test(String(d))) resolve();
          });
          child.once('exit', () => resolve());
        });
        return child;
      };
      const liveCount = async () =>
        (
          await pool(onRestart, 8, (m) =>
            waitLive(m.stream_url, o.signal).then(
              () => 1,
              () => 0,
            ),
          )
        ).reduce((a: number, b) => a + b, 0);
      const before = await feed();
      const liveBefore = await liveCount();
      const stopped = performance.now();
      const service = await o.restart();
      const restartSeconds = (performance.now() - stopped) / 1000;
      await stopProcess(before);
      const answering = performance.now();
      const documents = await pool(
        onRestart,
        8,
        async (m) =>
          (
            (await (
              await fetch(`${service.baseUrl}/services/${m.service_id}`, {
                headers: { authorization: `Bearer ${service.apiKey}` },
              })
            ).json()) as { service?: Bought }
          ).service,
      );
      const sameUrls = documents.filter(
        (d, i) => d?.stream_url === onRestart[i].stream_url && d?.broadcast_url === onRestart[i].broadcast_url,
      ).length;
      const after = await feed();
      const liveAfter = await liveCount();
      restart = {
        mounts: k,
        liveBefore,
        sameUrls,
        liveAfter,
        restartSeconds,
        backSeconds: (performance.now() - answering) / 1000,
      };
      o.log(
        `    live before ${liveBefore} / ${k}, after ${liveAfter} / ${k} (same URLs: ${sameUrls}); restart ${restartSeconds.toFixed(1)} s, all back ${restart.backSeconds.toFixed(1)} s later`,
      );
      await stopProcess(after);
    }
    return { sources, listeners, points, restart, icecastVersion };
  } finally {
    for (const c of cleanup.reverse()) await Promise.resolve(c()).catch(() => undefined);
  }
}

function admissionRun(
  label: string,
  latencies: number[],
  admitted: number,
  refused: Record<string, number>,
  seconds: number,
  service: CallbackStats,
): AdmissionRun {
  const sorted = Float64Array.from(latencies).sort();
  return {
    label,
    answers: latencies.length,
    admitted,
    refused,
    seconds,
    perSecond: latencies.length / seconds,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    service,
  };
}

export interface OpenListener {
  status: number;
  error?: string;
  at: number;
  bytes(): number;
  tail(): Buffer;
  close(): void;
}

/**
 * One listener: resolves at Icecast's answer (status, or 0 on a socket error); keeps counting bytes until closed.
 * With `readFrom`, it reads nothing until that promise resolves (TCP holds the audio back meanwhile).
 */
export function openListener(url: string, readFrom?: Promise<void>): Promise<OpenListener> {
  return new Promise((resolve) => {
    let received = 0;
    let last: Buffer = Buffer.alloc(0);
    const req = http.get(url, { agent: false, headers: { 'user-agent': 'bench-listener' } }, (res) => {
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
        last = chunk;
      });
      res.on('error', () => undefined);
      if (readFrom) {
        res.pause();
        void readFrom.then(() => res.resume());
      }
      resolve({
        status: res.statusCode ?? 0,
        at: performance.now(),
        bytes: () => received,
        tail: () => last,
        close: () => req.destroy(),
      });
    });
    req.on('error', (e) =>
      resolve({
        status: 0,
        error: (e as NodeJS.ErrnoException).code ?? e.message,
        at: performance.now(),
        bytes: () => 0,
        tail: () => Buffer.alloc(0),
        close: () => undefined,
      }),
    );
  });
}

export async function waitLive(url: string, signal: AbortSignal): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    signal.throwIfAborted();
    const l = await openListener(url);
    l.close();
    if (l.status === 200) return;
    if (Date.now() > deadline) throw new Error(`${url} did not go live (last answer ${l.status || l.error})`);
    await sleep(200);
  }
}

/** Waits until the service's callback count has not moved for 1 s (at most 30 s); returns the seconds waited. */
export async function drain(origin: string, signal: AbortSignal): Promise<number> {
  const started = performance.now();
  let last = -1;
  let stableSince = performance.now();
  while (performance.now() - started < 30_000) {
    signal.throwIfAborted();
    const { count } = await callbackMetrics(origin);
    if (count !== last) {
      last = count;
      stableSince = performance.now();
    } else if (performance.now() - stableSince >= 1000) break;
    await sleep(200);
  }
  return (stableSince - started) / 1000;
}

/** Count and total seconds of the service's callback requests, from its /metrics histogram. */
export async function callbackMetrics(origin: string): Promise<{ count: number; sum: number }> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  let count = 0;
  let sum = 0;
  for (const line of text.split('\n')) {
    // Icecast's callbacks, on their own server (icecast_callback_…) or, before it, the API's route.
    const own = line.startsWith('icecast_callback_duration_seconds_');
    if (!own && !line.includes('route="/internal/icecast/:action"')) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (/^(http_request|icecast_callback)_duration_seconds_count/.test(line)) count += value;
    else if (/^(http_request|icecast_callback)_duration_seconds_sum/.test(line)) sum += value;
  }
  return { count, sum };
}

function diff(a: { count: number; sum: number }, b: { count: number; sum: number }): CallbackStats {
  const count = b.count - a.count;
  return { count, meanMs: count ? ((b.sum - a.sum) / count) * 1000 : NaN };
}

type Group = keyof MountsPoint['usage'];
interface ProcSample {
  group: Group;
  cpu: number;
  pssKb: number;
}

/** CPU seconds and PSS of every process in the service's tree (classified by name), the sources child and this process. */
async function sampleTree(servicePid: number, sourcesPid: number): Promise<Map<number, ProcSample>> {
  const stats = new Map<number, { ppid: number; comm: string; cpu: number }>();
  await Promise.all(
    (await readdir('/proc'))
      .filter((n) => /^\d+$/.test(n))
      .map(async (n) => {
        try {
          const text = await readFile(`/proc/${n}/stat`, 'utf8');
          const comm = text.slice(text.indexOf('(') + 1, text.lastIndexOf(')'));
          const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
          stats.set(Number(n), { ppid: Number(rest[1]), comm, cpu: (Number(rest[11]) + Number(rest[12])) / 100 });
        } catch {
          /* ended meanwhile */
        }
      }),
  );
  const out = new Map<number, ProcSample>();
  const add = async (pid: number, group: Group) => {
    const s = stats.get(pid);
    if (!s) return;
    let pssKb = 0;
    try {
      pssKb = Number(/^Pss:\s+(\d+)/m.exec(await readFile(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
    } catch {
      /* gone or not permitted */
    }
    out.set(pid, { group, cpu: s.cpu, pssKb });
  };
  await add(servicePid, 'service');
  await add(sourcesPid, 'sources');
  await add(process.pid, 'listeners');
  const queue = [servicePid];
  while (queue.length) {
    const parent = queue.pop()!;
    for (const [pid, s] of stats) {
      if (s.ppid !== parent) continue;
      queue.push(pid);
      await add(pid, s.comm.startsWith('icecast') ? 'icecast' : s.comm.startsWith('postgres') ? 'postgres' : 'other');
    }
  }
  return out;
}

function usage(a: Map<number, ProcSample>, b: Map<number, ProcSample>, seconds: number): MountsPoint['usage'] {
  const groups: Group[] = ['service', 'icecast', 'postgres', 'sources', 'listeners', 'other'];
  const out = Object.fromEntries(groups.map((g) => [g, { cpu: 0, memMb: 0, processes: 0 }])) as MountsPoint['usage'];
  for (const [pid, s] of b) {
    const g = out[s.group];
    g.cpu += (s.cpu - (a.get(pid)?.cpu ?? 0)) / seconds;
    g.memMb += s.pssKb / 1024;
    g.processes++;
  }
  return out;
}

export function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  return exited.finally(() => clearTimeout(timer));
}
