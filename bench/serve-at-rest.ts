// What serve and PostgreSQL cost at rest (npx tsx bench/serve-at-rest.ts): a host in HAProxy mode with no service,
// then with 50 and 200 live instant-streams (raw sources), each with REST_LISTENERS listeners held by raw clients in
// child processes of their own, each measured over a window: CPU of serve, Icecast, HAProxy and PostgreSQL from /proc,
// PostgreSQL's statements per second by statement (pg_stat_statements, loaded into the bench's own copy of the
// cluster), its transactions and the rows written per second by table (pg_stat_database, pg_stat_user_tables). REST_BEFORE=DIR measures an older checkout of the code (its bin/agent-audio.mjs,
// e.g. `git archive COMMIT | tar -x -C DIR` with a node_modules link) in the same run, first; REST_AFTER=DIR another
// instead of this checkout. REST_PROFILE=1 prints
// where serve's busy time goes in each window (V8 CPU profile, inclusive time).
// Env: REST_STEPS (0,50,200), REST_LISTENERS (5), REST_AGE (10), REST_SECONDS (30), REST_SETTLE (75), REST_BEFORE,
// REST_AFTER, REST_PROFILE (0).
import { spawn } from 'node:child_process';
import { appendFile, mkdtemp, readdir, readFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { buy } from '../test/support/purchase.js';
import { roomyCatalog, scratchDir, type Service } from '../test/support/service.js';
import { copyTemplateCluster } from '../test/support/template-data-dir.js';
import { TestWallet } from '../test/support/wallet.js';
import { formatSummary, summarizeFile } from './cpu-profile-summary.js';
import { hostCpu } from './host-cpu.js';
import { ListenerFleet } from './listener-fleet.js';
import { startMp3Sources, type Sources } from './mp3-sources.js';
import { pool } from './pool.js';
import { drain, waitLive } from './streaming.js';

const steps = (process.env.REST_STEPS ?? '0,50,200').split(',').map(Number);
const windowSeconds = Number(process.env.REST_SECONDS ?? 30);
const listenersPerStream = Number(process.env.REST_LISTENERS ?? 5);
/** How long listeners are held before the window: a young stream's usage is written more often (usage-write.ts). */
const ageSeconds = Number(process.env.REST_AGE ?? 10);
const profile = process.env.REST_PROFILE === '1';
/** The first window waits this long after the start: a new leader counts expired services' final usage for 70 s. */
const settleSeconds = Number(process.env.REST_SETTLE ?? 75);
const KBPS = 32;
const root = fileURLToPath(new URL('../', import.meta.url));
const signal = AbortSignal.timeout(60 * 60_000);

interface Step {
  streams: number;
  cores: Record<string, number>;
  listeners: number;
  statementsPerSecond: number;
  /** Each statement's text, calls per second and rows per call. */
  statements: Array<[string, number, number]>;
  transactionsPerSecond: number;
  /** Rows inserted, updated or deleted per second, by table. */
  writes: Array<[string, number]>;
  profile?: string;
}

/** serve from `codeRoot`'s bin/agent-audio.mjs on a copy of the migrated template with pg_stat_statements loaded. */
async function startServe(codeRoot: string, profileDir?: string): Promise<Service> {
  const dataDir = await scratchDir('rest-data-');
  await copyTemplateCluster(dataDir, 'migrated');
  await appendFile(
    join(dataDir, 'pg/postgresql.auto.conf'),
    "shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = 'all'\n",
  );
  const env = {
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    ICECAST_PROXY: 'haproxy',
    RATE_LIMIT_PER_IP: '0',
    RATE_LIMIT_PER_KEY: '0',
    ICECAST_MAX_SOURCES: String(Math.max(...steps) + 10),
    ICECAST_MAX_LISTENERS: String(Math.max(...steps) * listenersPerStream + 500),
    ...(await roomyCatalog()),
  };
  const flags = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  const child = spawn(process.execPath, [...flags, join(codeRoot, 'bin/agent-audio.mjs'), 'serve'], {
    cwd: codeRoot,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stderr!.on('data', (d) => {
    output = (output + d).slice(-8000);
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  const baseUrl = await serving(child.stdout!, exited, () => output);
  const dev = JSON.parse(await readFile(join(dataDir, 'dev.json'), 'utf8'));
  return {
    baseUrl,
    metricsUrl: '',
    apiKey: dev.api_key,
    dataDir,
    env,
    process: child,
    output: () => output,
    cli: () => Promise.reject(new Error('not here')),
    stop: () => (child.kill('SIGTERM'), exited),
  };
}

function serving(stdout: NodeJS.ReadableStream, exited: Promise<number | null>, output: () => string): Promise<string> {
  let text = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start:\n${output()}`)), 180_000);
    stdout.on('data', (d) => {
      text += d;
      const m = /serving on (\S+)/.exec(text);
      const metrics = /metrics on (\S+)/.exec(text);
      if (m && metrics) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    void exited.then((code) => reject(new Error(`serve exited with ${code}:\n${output()}`)));
  });
}

async function buyStreams(service: Service, count: number): Promise<{ listen: string[]; broadcast: string[] }> {
  const dev = JSON.parse(await readFile(join(service.dataDir, 'dev.json'), 'utf8'));
  const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const bought = await pool(
    Array.from({ length: count }, (_, i) => i),
    4,
    async () => {
      const r = await buy(service, wallet, {
        product_id: 'instant-stream',
        email: 'bench@example.com',
        station_name: 'Bench',
        parameters: { duration_hours: 1, max_listeners: Math.max(5, listenersPerStream), bitrate_kbps: KBPS },
      });
      if (r.status !== 200) throw new Error(`buying answered ${r.status}: ${JSON.stringify(r.body)}`);
      return r.body.service as { broadcast_url: string; stream_url: string };
    },
  );
  return { listen: bought.map((b) => b.stream_url), broadcast: bought.map((b) => b.broadcast_url) };
}

const OWN = /pg_stat_statements|pg_stat_database|pg_stat_user_tables|pg_stat_clear_snapshot/;

/** Each statement since the last reset: its text, calls and rows per call. */
async function statements(db: pg.Client): Promise<Array<[string, number, number]>> {
  const { rows } = await db.query<{ query: string; calls: string; rows: string }>(
    'SELECT query, calls, rows FROM pg_stat_statements ORDER BY calls DESC',
  );
  return rows
    .filter((r) => !OWN.test(r.query))
    .map((r) => [r.query.replace(/\s+/g, ' '), Number(r.calls), Number(r.rows) / Math.max(1, Number(r.calls))]);
}

/** PostgreSQL's committed transactions and row writes per table, since it started (pg_stat_* lag by up to 1 s). */
async function pgCounters(db: pg.Client): Promise<{ xacts: number; writes: Map<string, number> }> {
  await db.query('SELECT pg_stat_clear_snapshot()');
  const {
    rows: [row],
  } = await db.query(
    'SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()',
  );
  const { rows } = await db.query<{ relname: string; n: string }>(
    'SELECT relname, n_tup_ins + n_tup_upd + n_tup_del AS n FROM pg_stat_user_tables',
  );
  return { xacts: Number(row.n), writes: new Map(rows.map((r) => [r.relname, Number(r.n)])) };
}

/** One window at rest: CPU per process (% of a core) and PostgreSQL's statements, transactions and row writes. */
async function measure(service: Service, db: pg.Client, streams: number, listeners: number, profiled: boolean) {
  const origin = new URL(service.baseUrl).origin;
  await drain(origin, signal).catch(() => 0);
  await sleep(3000);
  await db.query('SELECT pg_stat_statements_reset()');
  const pid = service.process.pid!;
  const [p0, c0, t0, at0] = [await pgCounters(db), await hostCpu(pid), performance.now(), process.hrtime.bigint()];
  await sleep(windowSeconds * 1000);
  const [c1, t1, at1] = [await hostCpu(pid), performance.now(), process.hrtime.bigint()];
  const seconds = (t1 - t0) / 1000;
  const p1 = await pgCounters(db);
  const byStatement = (await statements(db)).map(([q, n, rows]) => [q, n / seconds, rows] as [string, number, number]);
  const cores = Object.fromEntries(
    Object.keys(c1).map((k) => [k, ((c1[k as keyof typeof c1] - c0[k as keyof typeof c0]) / seconds) * 100]),
  );
  const writes = [...p1.writes]
    .map(([table, n]) => [table, (n - (p0.writes.get(table) ?? 0)) / seconds] as [string, number])
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1]);
  return {
    streams,
    listeners,
    cores,
    statementsPerSecond: byStatement.reduce((n, [, r]) => n + r, 0),
    statements: byStatement,
    // The three transactions of the window's first counter read are left out.
    transactionsPerSecond: (p1.xacts - p0.xacts - 3) / seconds,
    writes,
    profile: profiled ? `${Number(at0 / 1000n)} ${Number(at1 / 1000n)}` : undefined,
  } satisfies Step;
}

async function variant(codeRoot: string, fleet: ListenerFleet): Promise<Step[]> {
  const profileDir = profile ? await mkdtemp(join(tmpdir(), 'rest-profile-')) : undefined;
  const service = await startServe(codeRoot, profileDir);
  const db = new pg.Client(JSON.parse(await readFile(join(service.dataDir, 'serve.lock'), 'utf8')).database_url);
  await db.connect();
  await db.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  const sources: Sources[] = [];
  const results: Step[] = [];
  await sleep(settleSeconds * 1000);
  try {
    let live = 0;
    let listening = 0;
    for (const target of steps) {
      if (target > live) {
        const bought = await buyStreams(service, target - live);
        const started = await startMp3Sources(root, bought.broadcast, KBPS);
        sources.push(started);
        if (started.admitted !== bought.broadcast.length) throw new Error(`sources: ${JSON.stringify(started)}`);
        await Promise.all(bought.listen.map((u) => waitLive(u, signal)));
        live = target;
        listening += await hold(fleet, bought.listen);
      }
      results.push(await measure(service, db, live, listening, profile));
    }
  } finally {
    await fleet.closeAll();
    await db.end();
    for (const s of sources) await s.stop();
    await service.stop();
  }
  if (profileDir) await attachProfiles(profileDir, results);
  return results;
}

/** Opens REST_LISTENERS listeners on each stream; returns how many were admitted. */
async function hold(fleet: ListenerFleet, listen: string[]): Promise<number> {
  if (!listenersPerStream) return 0;
  const opened = await fleet.open(listen.flatMap((u) => Array(listenersPerStream).fill(u)));
  // Past their admission: their sessions, the new peaks and the sources' events are written by then.
  await sleep(ageSeconds * 1000);
  return opened.answers.filter((a) => a.status === 200).length;
}

async function attachProfiles(dir: string, results: Step[]): Promise<void> {
  const [file] = (await readdir(dir)).filter((f) => f.endsWith('.cpuprofile'));
  if (!file) return;
  const profile = JSON.parse(await readFile(join(dir, file), 'utf8')) as RawProfile;
  for (const r of results) {
    const [from, to] = r.profile!.split(' ').map(Number);
    const passes = byPass(profile, from, to)
      .map(([name, ms]) => `  ${name} ${((ms / 1000 / ((to - from) / 1e6)) * 60).toFixed(3)} CPU-s/min`)
      .join('\n');
    r.profile = `${formatSummary(await summarizeFile(join(dir, file), from, to, 15))}\nby pass (JS on its stack):\n${passes}`;
  }
}

interface RawProfile {
  nodes: Array<{ id: number; callFrame: { url: string }; children?: number[] }>;
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Where each periodic pass's code is: a sample counts for a pass when a frame of these files is on its stack. */
const PASSES: Array<[string, RegExp]> = [
  ['catalog check', /\/catalog\/(live-snapshot|directory-watch|file-stats)|pricing\/files/],
  ['life-cycle pass', /lifecycle-worker|transfer-renewal|\/rules\//],
  ['usage meter', /icecast-usage-meter|mount-meter|icecast-admin|access-log|source-budget|source-rate/],
  ['recorder', /\/recordings\//],
  ['HLS', /\/hls\//],
  ['listener places', /listener-places|place-writer|channel-listener/],
  ['hosts', /\/hosts\//],
  ['webhooks and events', /\/events\//],
  ['orders and refunds', /\/orders\/|\/refunds\//],
  ['PostgreSQL client', /node_modules\/pg/],
];

function byPass(profile: RawProfile, from: number, to: number): Array<[string, number]> {
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const url = new Map(profile.nodes.map((n) => [n.id, n.callFrame.url]));
  const ms = new Map<string, number>();
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i];
    if (at < from || at > to) continue;
    const onStack = new Set<string>();
    for (let id: number | undefined = profile.samples[i]; id !== undefined; id = parent.get(id))
      for (const [name, pattern] of PASSES) if (pattern.test(url.get(id) ?? '')) onStack.add(name);
    for (const name of onStack) ms.set(name, (ms.get(name) ?? 0) + (profile.timeDeltas[i + 1] ?? 0) / 1000);
  }
  return PASSES.map(([name]) => [name, ms.get(name) ?? 0]);
}

const pct = (n: number) => n.toFixed(2);
const rowsWritten = (r: Step) => r.writes.reduce((n, [, w]) => n + w, 0);

function report(name: string, results: Step[]): void {
  console.log(`\n== ${name}`);
  for (const r of results) {
    const c = r.cores;
    console.log(
      `${r.streams} streams, ${r.listeners} listeners (% of a core): serve ${pct(c.serve)}, icecast ${pct(c.icecast)}, ` +
        `haproxy ${pct(c.proxy)}, postgres ${pct(c.postgres)}; serve ÷ icecast ${(c.serve / c.icecast).toFixed(2)}; ` +
        `CPU-s per minute: serve ${((c.serve * 60) / 100).toFixed(2)}, postgres ${((c.postgres * 60) / 100).toFixed(2)}; ` +
        `statements/s ${r.statementsPerSecond.toFixed(1)}, transactions/s ${r.transactionsPerSecond.toFixed(1)}`,
    );
    console.log(`  rows written/s: ${r.writes.map(([t, n]) => `${t} ${n.toFixed(2)}`).join(', ') || 'none'}`);
    for (const [q, n, rows] of r.statements.slice(0, 30))
      console.log(`  ${n.toFixed(2).padStart(7)}/s ${rows.toFixed(0).padStart(5)} rows  ${q.slice(0, 140)}`);
    if (r.profile) console.log(r.profile);
  }
}

console.log(
  `load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}; windows of ${windowSeconds} s`,
);
const fleet = await ListenerFleet.start(root, Math.max(...steps) * listenersPerStream);
const before = process.env.REST_BEFORE ? await variant(process.env.REST_BEFORE, fleet) : undefined;
if (before) report(`before (${process.env.REST_BEFORE})`, before);
const afterRoot = process.env.REST_AFTER ?? root;
const after = await variant(afterRoot, fleet).finally(() => fleet.stop());
report(`after (${afterRoot})`, after);
if (before) {
  console.log('\nafter ÷ before:');
  for (const [i, a] of after.entries()) {
    const b = before[i];
    console.log(
      `${a.streams} streams: serve ${(a.cores.serve / b.cores.serve).toFixed(2)}×, postgres ` +
        `${(a.cores.postgres / b.cores.postgres).toFixed(2)}×, statements/s ${b.statementsPerSecond.toFixed(1)} → ` +
        `${a.statementsPerSecond.toFixed(1)}`,
    );
  }
}
console.log(
  `load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
