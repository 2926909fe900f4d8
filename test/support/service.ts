import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, appendFileSync, constants, existsSync, rmSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync, inflateSync } from 'node:zlib';
import { treeCpu } from '../../bench/process-cpu.js';
import { outputOf } from './child-output.js';
import { prebuiltEntry } from './prebuilt-cli.js';
import { copyTemplateCluster } from './template-data-dir.js';

export const root = fileURLToPath(new URL('../../', import.meta.url));
export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the CLI as a user would, with the given environment on top of this process's: its entry, transformed ahead of
 * time (see prebuiltEntry: the same code as bin/agent-audio.mjs runs, without the seconds tsx takes to load it).
 */
export async function cli(args: string[], env: Record<string, string> = {}, timeoutMs = 60_000): Promise<CliResult> {
  const flags = computesForSeconds(args) ? [] : childNodeFlags();
  return runNode([...flags, ...(await prebuiltEntry()), ...args], env, timeoutMs);
}

/** Runs node with these arguments in the project folder and collects its output. */
export function runNode(args: string[], env: Record<string, string> = {}, timeoutMs = 60_000): Promise<CliResult> {
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return outputOf(child, `node ${args.join(' ')}`, timeoutMs);
}

const scratchDirs = new Set<string>();
process.once('exit', () => {
  for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true });
});

/** A new folder under the system's temporary folder (or `under`), removed when this test process exits. */
export async function scratchDir(prefix: string, under = tmpdir()): Promise<string> {
  const dir = await mkdtemp(join(under, prefix));
  scratchDirs.add(dir);
  return dir;
}

/** A copy of catalog/ and rules/ that a test may edit. */
export async function copyCatalog(): Promise<{
  dir: string;
  catalogDir: string;
  rulesDir: string;
  remove(): Promise<void>;
}> {
  const dir = await scratchDir('audio-catalog-');
  await cp(join(root, 'catalog'), join(dir, 'catalog'), { recursive: true });
  await cp(join(root, 'rules'), join(dir, 'rules'), { recursive: true });
  return {
    dir,
    catalogDir: join(dir, 'catalog'),
    rulesDir: join(dir, 'rules'),
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

/**
 * A copy of the catalog whose per-key and per-payer limits (and no capacity reserve) leave room for a test or benchmark
 * that buys hundreds of streams with one key and one wallet (the limits are still checked on every order); the env
 * that serves it.
 */
export async function roomyCatalog(): Promise<{ CATALOG_DIR: string; RULES_DIR: string }> {
  const catalog = await copyCatalog();
  const settingsFile = join(catalog.catalogDir, 'catalog.yaml');
  await writeFile(
    settingsFile,
    (await readFile(settingsFile, 'utf8')).replace(
      /(per_key|per_payer): \{[^}]*\}/g,
      '$1: { live_services: 100000, listener_places: 10000000 }',
    ),
  );
  await withoutCapacityReserve(catalog.catalogDir);
  return { CATALOG_DIR: catalog.catalogDir, RULES_DIR: catalog.rulesDir };
}

/**
 * Takes the capacity reserve out of a catalog copy, for tests that fill a host with one wallet without paid history
 * (test/sybil.test.ts tests the reserve).
 */
export async function withoutCapacityReserve(catalogDir: string): Promise<void> {
  const settingsFile = join(catalogDir, 'catalog.yaml');
  const text = await readFile(settingsFile, 'utf8');
  const without = text.replace(/^capacity_reserve:\n(  .*\n)+/m, '');
  if (without === text) throw new Error('the catalog sets no capacity_reserve to take out');
  await writeFile(settingsFile, without);
}

export interface Service {
  baseUrl: string;
  /** The Prometheus listener's /metrics address (its own loopback port). */
  metricsUrl: string;
  apiKey: string;
  dataDir: string;
  env: Record<string, string>;
  process: ChildProcess;
  output(): string;
  cli(args: string[]): Promise<CliResult>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export interface StartOptions {
  dataDir?: string;
  freshDatabase?: boolean;
  /** serve's own arguments, e.g. ['--role', 'host']. */
  args?: string[];
  /**
   * The test keeps the service running hot code (hundreds of catalog reloads, say) rather than starting it to answer
   * a few requests: it runs with node's default flags, as in production, optimizing compiler included.
   */
  hot?: boolean;
  /** serve's open-files limit, soft and hard (prlimit): what a host with a low limit does. */
  openFiles?: number;
}

/**
 * Starts `serve` in its own process on a fresh DATA_DIR and a free loopback port. A DATA_DIR without a database gets
 * a copy of the migrated template cluster (what serve's first start would make, without the seconds initdb takes);
 * `freshDatabase` leaves it to serve.
 */
export async function startService(env: Record<string, string> = {}, options: StartOptions = {}): Promise<Service> {
  const dataDir = options.dataDir ?? (await scratchDir('audio-data-', dataDirRoot()));
  const hasDatabase = env.DATABASE_URL || existsSync(join(dataDir, 'pg'));
  if (!options.freshDatabase && !hasDatabase) await copyTemplateCluster(dataDir, 'migrated');
  const fullEnv = { DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', ...env };
  const entry = options.hot ? await prebuiltEntry() : await serveEntry();
  const args = [...entry, 'serve', ...(options.args ?? [])];
  // prlimit execs node itself: the child's pid is serve's.
  const [command, commandArgs] = options.openFiles
    ? ['prlimit', [`--nofile=${options.openFiles}:${options.openFiles}`, '--', process.execPath, ...args]]
    : [process.execPath, args];
  const child = spawn(command, commandArgs, {
    cwd: root,
    env: { ...process.env, ...fullEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stderr!.on('data', (d) => {
    output += d;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let stdout = '';
  const [servingUrl, metricsUrl] = await new Promise<[string, string]>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start:\n${output}`)), 120_000);
    child.stdout!.on('data', (d) => {
      stdout += d;
      // A streaming host prints its Icecast's address ("streaming on"): it serves no API.
      const serving = /(?:serving|streaming) on (\S+)/.exec(stdout);
      const metrics = /metrics on (\S+)/.exec(stdout);
      if (serving && metrics) {
        clearTimeout(timer);
        resolve([serving[1], metrics[1]]);
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited with ${code}:\n${output}`));
    });
  });
  // A host's HTTP server (its Icecast's callbacks) is where the tests check that it answers nothing of the API.
  const baseUrl = /serving on /.test(stdout) ? servingUrl : await lockedBaseUrl(dataDir);
  const dev = JSON.parse(await readFile(join(dataDir, 'dev.json'), 'utf8').catch(() => '{"api_key": ""}')) as {
    api_key: string;
  };
  const readyCpu = await serviceCpu(child.pid!);
  let stopped: Promise<number | null> | undefined;
  return {
    baseUrl,
    metricsUrl,
    apiKey: dev.api_key,
    dataDir,
    env: fullEnv,
    process: child,
    output: () => output,
    cli: (args) => cli(args, fullEnv),
    stop(signal = 'SIGTERM') {
      stopped ??= serviceCpu(child.pid!).then((stopCpu) => {
        logServiceCpu(readyCpu, stopCpu);
        child.kill(signal);
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        return exited.finally(() => clearTimeout(timer));
      });
      return stopped;
    },
  };
}

/** CPU seconds of a serve and every process below it (PostgreSQL, chain, Icecast…); 0 once it exited. */
async function serviceCpu(pid: number): Promise<number> {
  const cpu = await treeCpu(pid);
  return cpu ? cpu.self + cpu.descendants : 0;
}

/**
 * With TEST_SERVICE_CPU_LOG (set by `npm test`), one line per service stopped through stop(): the CPU it took to get
 * ready and its whole CPU until stopped, summed at the end of the run (what starting services costs the suite).
 */
function logServiceCpu(readyCpu: number, stopCpu: number): void {
  const log = process.env.TEST_SERVICE_CPU_LOG;
  if (log && stopCpu > 0) appendFileSync(log, `${JSON.stringify({ ready: readyCpu, total: stopCpu })}\n`);
}

/** The HTTP address serve wrote to its DATA_DIR's lock. */
async function lockedBaseUrl(dataDir: string): Promise<string> {
  return JSON.parse(await readFile(join(dataDir, 'serve.lock'), 'utf8')).base_url;
}

/** Node's arguments before `serve` for a serve the tests start themselves: the prebuilt entry with the test flags. */
export async function serveEntry(): Promise<string[]> {
  return [...childNodeFlags(), ...(await prebuiltEntry())];
}

/**
 * V8 flags for the services and CLI commands `npm test` starts (TEST_NODE_FLAGS, set by scripts/test.mjs): the same
 * code, compiled differently. Benchmarks and a test file run on its own start them with node's defaults.
 */
function childNodeFlags(): string[] {
  return (process.env.TEST_NODE_FLAGS ?? '').split(' ').filter(Boolean);
}

/**
 * A command that runs hot code for seconds rather than start-up code once: `catalog diff` prices thousands of
 * configurations, which the optimizing compiler makes cheaper than it costs. It runs with node's defaults.
 */
function computesForSeconds(args: string[]): boolean {
  return args[0] === 'catalog' && args[1] === 'diff';
}

/**
 * Where a service's own DATA_DIR goes: memory (/dev/shm, a tmpfs) where the machine has it. Copying the template
 * cluster there costs a tenth of what it costs on a loaded disk, and PostgreSQL's fsyncs cost nothing; what the
 * service does with its DATA_DIR is the same.
 */
function dataDirRoot(): string {
  try {
    accessSync(memoryDir, constants.W_OK);
    return memoryDir;
  } catch {
    return tmpdir();
  }
}
const memoryDir = '/dev/shm';

export interface JsonResponse {
  status: number;
  headers: Headers;
  body: any;
}

export async function request(
  service: Pick<Service, 'baseUrl' | 'apiKey'>,
  method: string,
  path: string,
  options: { body?: unknown; rawBody?: string | Buffer; headers?: Record<string, string>; auth?: boolean } = {},
): Promise<JsonResponse> {
  const headers: Record<string, string> = {
    ...(options.auth !== false && { authorization: `Bearer ${service.apiKey}` }),
    ...options.headers,
  };
  let body: string | Buffer | undefined = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const answer = await send(new URL(service.baseUrl + path), method, headers, body).catch((error: Error) => {
    throw new Error(`${method} ${path}: ${error.message}`, { cause: error });
  });
  const text = answer.body.toString('utf8');
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: answer.status, headers: answer.headers, body: parsed };
}

/** What fetch sends unless told otherwise: the service sees the same requests it saw when the tests used fetch. */
const fetchDefaults: Record<string, string> = {
  accept: '*/*',
  'accept-language': '*',
  'sec-fetch-mode': 'cors',
  'user-agent': 'node',
  'accept-encoding': 'gzip, deflate',
};

/**
 * One HTTP request with node:http. The tests make thousands: fetch (undici, web streams) cost about a millisecond of
 * CPU more per request, and its first use in each test process more. Bounded well below undici's own 300 s, so that a
 * request the service never answers fails the test by its name.
 */
function send(
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: string | Buffer | undefined,
): Promise<{ status: number; headers: Headers; body: Buffer }> {
  const sent = { ...fetchDefaults, ...lowerCased(headers) };
  if (body !== undefined) sent['content-length'] = String(Buffer.byteLength(body));
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(url, { method, headers: sent, signal: AbortSignal.timeout(120_000) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => {
        const raw = Buffer.concat(chunks);
        resolve({ status: res.statusCode!, headers: headersOf(res.rawHeaders), body: decoded(raw, res.headers) });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

function lowerCased(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));
}

function headersOf(raw: string[]): Headers {
  const headers = new Headers();
  for (let i = 0; i < raw.length; i += 2) headers.append(raw[i], raw[i + 1]);
  return headers;
}

/** The body as fetch gives it: decompressed. */
function decoded(raw: Buffer, headers: http.IncomingHttpHeaders): Buffer {
  const encoding = headers['content-encoding'];
  if (encoding === 'gzip' || encoding === 'x-gzip') return gunzipSync(raw);
  if (encoding === 'deflate') return inflateSync(raw);
  return raw;
}
