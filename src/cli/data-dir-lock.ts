import { link, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface LockInfo {
  pid: number;
  database_url?: string;
  base_url?: string;
}

/** One serve per DATA_DIR: a second one would run a second PostgreSQL on the same files. */
export class DataDirLock {
  private constructor(
    private readonly file: string,
    private info: LockInfo,
  ) {}

  static path(dataDir: string): string {
    return join(dataDir, 'serve.lock');
  }

  static async acquire(dataDir: string): Promise<DataDirLock> {
    await mkdir(dataDir, { recursive: true });
    const file = DataDirLock.path(dataDir);
    for (let attempt = 0; attempt < 2; attempt++) {
      const info = { pid: process.pid };
      const candidate = `${file}.${process.pid}`;
      await writeFile(candidate, JSON.stringify(info), { mode: 0o600 });
      try {
        await link(candidate, file);
        return new DataDirLock(file, info);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
        const holder = await DataDirLock.holder(dataDir);
        if (holder)
          throw new Error(
            `another serve (pid ${holder.pid}) is already using DATA_DIR ${dataDir}; stop it first or set ` +
              `DATA_DIR to another directory`,
          );
        await rm(file, { force: true });
      } finally {
        await rm(candidate, { force: true });
      }
    }
    throw new Error(`could not lock ${file}`);
  }

  /** The live process holding the lock, if any; a lock left by a killed process is ignored. */
  static async holder(dataDir: string): Promise<LockInfo | undefined> {
    try {
      const info = JSON.parse(await readFile(DataDirLock.path(dataDir), 'utf8')) as LockInfo;
      process.kill(info.pid, 0);
      return info;
    } catch {
      return undefined;
    }
  }

  async update(fields: Omit<LockInfo, 'pid'>): Promise<void> {
    this.info = { ...this.info, ...fields };
    const next = `${this.file}.${process.pid}`;
    await writeFile(next, JSON.stringify(this.info), { mode: 0o600 });
    await rename(next, this.file);
  }

  async release(): Promise<void> {
    await rm(this.file, { force: true });
  }
}
