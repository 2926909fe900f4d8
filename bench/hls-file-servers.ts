// Which C server serves HLS segments (npm run bench:hls-file-servers): nginx (src/provisioning/hls-file-server.ts)
// against Icecast's own file server (its webroot, <fileserve>1), the same segment files, the same players. Prints
// each server's CPU per 1,000 segments and the time the players waited for a segment.
// Env: PLAYERS (200), FETCHES (20 per player).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { HlsFileServer } from '../src/provisioning/hls-file-server.js';

const players = Number(process.env.PLAYERS ?? 200);
const fetches = Number(process.env.FETCHES ?? 20);
/** A 4 s segment of 128 kbps AAC in MPEG-TS is about 70 KB. */
const SEGMENT_BYTES = 70_000;
const SEGMENTS = 6;
const SERVICE = 'svc_benchfileservers';

function cpuOf(pid: number): Promise<number> {
  return import('node:fs/promises').then(async ({ readFile }) => {
    const rest = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1].split(' ');
    return (Number(rest[11]) + Number(rest[12])) / 100;
  });
}

async function segments(dir: string): Promise<string[]> {
  const names: string[] = [];
  await mkdir(join(dir, SERVICE), { recursive: true });
  for (let n = 0; n < SEGMENTS; n++) {
    const name = `seg${1_700_000_000 + n}-${randomBytes(9).toString('base64url')}.ts`;
    await writeFile(join(dir, SERVICE, name), randomBytes(SEGMENT_BYTES), { mode: 0o644 });
    names.push(`/hls/${SERVICE}/${name}`);
  }
  return names;
}

async function icecast(dir: string, webroot: string): Promise<{ pid: number; base: string; stop: () => void }> {
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const config = `<icecast><limits><clients>${players + 50}</clients><sources>2</sources></limits>
<authentication><admin-user>admin</admin-user><admin-password>${randomBytes(9).toString('hex')}</admin-password>
</authentication><listen-socket><port>${port}</port><bind-address>127.0.0.1</bind-address></listen-socket>
<fileserve>1</fileserve><paths><basedir>/usr/share/icecast2</basedir><logdir>${dir}</logdir>
<webroot>${webroot}</webroot><adminroot>/usr/share/icecast2/admin</adminroot></paths>
<logging><accesslog>access.log</accesslog><errorlog>error.log</errorlog><loglevel>1</loglevel></logging>
<security><chroot>0</chroot></security></icecast>`;
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'icecast.xml'), config);
  await chmod(dir, 0o777);
  const asUser = process.getuid?.() === 0 ? ['--reuid=icecast2', '--regid=icecast', '--init-groups'] : [];
  const child = spawn('setpriv', [
    ...asUser,
    '--pdeathsig',
    'SIGKILL',
    '--',
    'icecast2',
    '-c',
    join(dir, 'icecast.xml'),
  ]);
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200 && !(await fetch(base).catch(() => undefined)); i++) await sleep(50);
  return { pid: child.pid!, base, stop: () => child.kill('SIGKILL') };
}

/** `players` players at once, each fetching `fetches` segments in turn on a kept-alive connection. */
async function load(base: string, paths: string[]): Promise<{ ms: number; failures: number; waits: number[] }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: players });
  const waits: number[] = [];
  let failures = 0;
  const began = performance.now();
  await Promise.all(
    Array.from({ length: players }, async (_, p) => {
      for (let i = 0; i < fetches; i++) {
        const t = performance.now();
        const ok = await new Promise<boolean>((resolve) => {
          http
            .get(base + paths[(p + i) % paths.length], { agent }, (res) => {
              let bytes = 0;
              res.on('data', (c: Buffer) => (bytes += c.length));
              res.on('end', () => resolve(res.statusCode === 200 && bytes === SEGMENT_BYTES));
              res.on('error', () => resolve(false));
            })
            .on('error', () => resolve(false));
        });
        if (!ok) failures++;
        waits.push(performance.now() - t);
      }
    }),
  );
  agent.destroy();
  return { ms: performance.now() - began, failures, waits: waits.sort((a, b) => a - b) };
}

async function measure(name: string, pid: number, base: string, paths: string[]): Promise<void> {
  await load(base, paths.slice(0, 1)); // warm
  const before = await cpuOf(pid);
  const run = await load(base, paths);
  const cpu = (await cpuOf(pid)) - before;
  const total = players * fetches;
  const p = (q: number) => run.waits[Math.floor(q * (run.waits.length - 1))].toFixed(1);
  console.log(
    `${name.padEnd(22)} ${total} segments in ${(run.ms / 1000).toFixed(2)} s, failures ${run.failures}, ` +
      `CPU ${cpu.toFixed(2)} s (${((cpu / total) * 1000).toFixed(3)} s per 1,000), wait p50 ${p(0.5)} ms p99 ${p(0.99)} ms`,
  );
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'hls-file-servers-'));
  await chmod(dir, 0o755);
  try {
    const webroot = join(dir, 'web');
    const paths = await segments(webroot);
    await chmod(webroot, 0o755);
    await chmod(join(webroot, SERVICE), 0o755);
    console.log(`${players} players, ${fetches} segments of ${SEGMENT_BYTES} bytes each`);
    const nginx = new HlsFileServer({
      runDir: join(dir, 'nginx'),
      hlsDir: join(webroot, 'hls'),
      host: '127.0.0.1',
      segmentMaxAgeSeconds: 30,
    });
    // nginx serves /hls/{service}/… from hlsDir; the same files sit under Icecast's webroot at the same path.
    await mkdir(join(webroot, 'hls'), { recursive: true });
    await chmod(join(webroot, 'hls'), 0o755);
    await rm(join(webroot, 'hls'), { recursive: true });
    await import('node:fs/promises').then(({ symlink }) => symlink(webroot, join(webroot, 'hls')));
    await nginx.start();
    await measure('nginx', nginx.pid!, nginx.publicUrl, paths);
    await nginx.stop();
    const ice = await icecast(join(dir, 'icecast'), webroot).catch(async (e) => {
      throw new Error(`icecast: ${e}`);
    });
    await measure('icecast2 fileserve', ice.pid, ice.base, paths);
    ice.stop();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
