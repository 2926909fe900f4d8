import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** Whoever waits for another process's build gives up after this long (a build takes seconds). */
const BUILD_WAIT_MS = 180_000;

/** A build no test process has asked for in this long is removed when a sibling is built (the source moved on). */
export const UNUSED_BUILD_MS = 24 * 3600 * 1000;

/**
 * The folder `dir`, made by `build` once for every test process of the machine: the first process that needs it
 * builds it into a folder of its own, under a lock, and moves it into place whole; the others wait for it. Name the
 * folder by a hash of what it is made from (`NAME-` and 16 hex digits), so that a change builds a new one; building
 * one removes its siblings of the same name that no process has used for UNUSED_BUILD_MS.
 */
export async function builtOnce(dir: string, build: (into: string) => Promise<void>): Promise<string> {
  const deadline = Date.now() + BUILD_WAIT_MS;
  await mkdir(dirname(dir), { recursive: true });
  while (!existsSync(join(dir, 'ready'))) {
    if (await takeLock(`${dir}.lock`)) {
      try {
        if (!existsSync(join(dir, 'ready'))) await buildInto(dir, build);
      } finally {
        await rm(`${dir}.lock`, { recursive: true, force: true });
      }
    } else {
      if (Date.now() > deadline) {
        throw new Error(`${dir} was not built within ${BUILD_WAIT_MS / 1000} s by the process holding ${dir}.lock`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  const now = new Date();
  await utimes(join(dir, 'ready'), now, now).catch(() => undefined); // when it was last used
  return dir;
}

async function buildInto(dir: string, build: (into: string) => Promise<void>): Promise<void> {
  const building = `${dir}.build-${process.pid}`;
  await rm(building, { recursive: true, force: true });
  await mkdir(building, { recursive: true });
  await build(building);
  await writeFile(join(building, 'ready'), new Date().toISOString());
  await rm(dir, { recursive: true, force: true });
  await rename(building, dir);
  await removeUnusedSiblings(dir);
}

async function removeUnusedSiblings(dir: string): Promise<void> {
  const name = /^(.+-)[0-9a-f]{16}$/.exec(basename(dir))?.[1];
  if (!name) return;
  const siblings = (await readdir(dirname(dir))).filter(
    (entry) => entry.startsWith(name) && /^[0-9a-f]{16}$/.test(entry.slice(name.length)),
  );
  for (const sibling of siblings.map((entry) => join(dirname(dir), entry)).filter((path) => path !== dir)) {
    const used = await stat(join(sibling, 'ready')).catch(() => undefined);
    if (used && Date.now() - used.mtimeMs > UNUSED_BUILD_MS) await rm(sibling, { recursive: true, force: true });
  }
}

/** mkdir is atomic: one process gets the lock. A lock whose process has gone (a killed run) is taken over. */
async function takeLock(lock: string): Promise<boolean> {
  try {
    await mkdir(lock);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    const holder = Number(await readFile(join(lock, 'pid'), 'utf8').catch(() => ''));
    // /proc holds a folder for every live process (Linux). A holder writes its pid right after taking the lock.
    const justTaken = !holder && Date.now() - (await stat(lock).catch(() => ({ mtimeMs: 0 }))).mtimeMs < 10_000;
    if (justTaken || (holder && existsSync(`/proc/${holder}`))) return false;
    await rm(lock, { recursive: true, force: true });
    return takeLock(lock);
  }
  await writeFile(join(lock, 'pid'), String(process.pid));
  return true;
}
