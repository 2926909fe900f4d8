import { EventEmitter } from 'node:events';
import { openSnapshot, readSnapshotFiles, snapshotHash, type Snapshot, type SnapshotFiles } from '../pricing/index.js';
import { DirectoryWatch } from './directory-watch.js';
import { fileStats, isRacy, type FileStats } from './file-stats.js';
import { formatDiagnostic, type Diagnostic } from './source.js';

export class CatalogInvalidError extends Error {
  constructor(readonly diagnostics: Diagnostic[]) {
    super(`the catalog or rules are invalid:\n${diagnostics.map(formatDiagnostic).join('\n')}`);
  }
}

/** The most recent rejected edit: where the first error is and when it was seen. */
export interface ReloadError {
  location: string;
  message: string;
  at: string;
}

/**
 * The snapshot being served, kept equal to what is on disk under catalog/ and rules/.
 * File-system events make a reload fast; a periodic check makes it certain (events can be lost: a full inotify queue,
 * a network file system). The check reads and hashes the files only when their stat changed since the last read, or
 * is too recent to tell (mtimes do not change within the same tick).
 * An invalid edit keeps the last good snapshot and reports its errors. Emits 'reloaded' (snapshot) and 'rejected'
 * (diagnostics).
 */
export class LiveSnapshot extends EventEmitter {
  private directories?: DirectoryWatch;
  private debounce?: NodeJS.Timeout;
  private interval?: NodeJS.Timeout;
  private running = Promise.resolve(false);
  private queued?: Promise<boolean>;
  /** Content hash of what was last read from disk (equal to the served hash once converged). */
  diskHash: string;
  /** Errors of the content on disk when it cannot be served; empty when what is served is what is on disk. */
  lastDiagnostics: Diagnostic[] = [];
  lastError?: ReloadError;
  private rejectedHash?: string;
  /** The files' stat taken before the last read the periodic check made, and when that read began. */
  private checked?: { stats: FileStats; readAt: number };
  private readFailed = false;

  private constructor(
    private snapshot: Snapshot,
    private readonly catalogDir: string,
    private readonly rulesDir: string,
  ) {
    super();
    this.diskHash = snapshot.hash;
  }

  static async open(catalogDir: string, rulesDir: string): Promise<LiveSnapshot> {
    const { snapshot, diagnostics } = await openSnapshot(readSnapshotFiles(catalogDir, rulesDir));
    if (!snapshot) throw new CatalogInvalidError(diagnostics);
    return new LiveSnapshot(snapshot, catalogDir, rulesDir);
  }

  get current(): Snapshot {
    return this.snapshot;
  }

  /**
   * Reloads on file-system events (after debounceMs of quiet) and checks the files every checkIntervalMs.
   * Resolves once the directories are watched.
   */
  watch({ debounceMs = 50, checkIntervalMs = 500 } = {}): Promise<void> {
    // Watches are armed again before each read, so that an edit made while the files are read makes an event.
    const rearmAndReload = () => this.directories!.rearm().then(() => this.reload());
    this.directories = new DirectoryWatch([this.catalogDir, this.rulesDir], () => {
      clearTimeout(this.debounce);
      this.debounce = setTimeout(() => void rearmAndReload(), debounceMs);
    });
    this.interval = setInterval(() => this.check(rearmAndReload), checkIntervalMs);
    this.interval.unref();
    return this.directories.rearm();
  }

  /** The periodic check: reads the files again unless their stat shows they are what the last check read. */
  private check(rearmAndReload: () => Promise<unknown>): void {
    const stats = fileStats([this.catalogDir, this.rulesDir]);
    const last = this.checked;
    if (last && last.stats.signature === stats.signature && !isRacy(stats, last.readAt)) return;
    const readAt = Date.now();
    this.readFailed = false;
    void rearmAndReload().then(
      () => {
        this.checked = this.readFailed ? undefined : { stats, readAt };
      },
      () => undefined,
    );
  }

  /** Reads the files again; returns true when a new snapshot is now served. Calls while one waits share it. */
  reload(): Promise<boolean> {
    if (this.queued) return this.queued;
    const run = this.running.then(() => {
      this.queued = undefined;
      return this.load();
    });
    this.queued = run;
    this.running = run.catch(() => false);
    return run;
  }

  private async load(): Promise<boolean> {
    let files = await this.readFiles();
    for (let round = 0; files && round < 5; round++) {
      const hash = snapshotHash(files);
      this.diskHash = hash;
      if (hash === this.snapshot.hash) {
        this.lastDiagnostics = [];
        return false;
      }
      if (hash === this.rejectedHash) return false;
      const opened = await openSnapshot(files);
      // Only content that stayed the same while it was checked is served or reported: not a file caught mid-write.
      const again = await this.readFiles();
      if (again && snapshotHash(again) === hash) return this.adopt(hash, opened);
      files = again;
    }
    return false;
  }

  private adopt(hash: string, { snapshot, diagnostics }: Awaited<ReturnType<typeof openSnapshot>>): boolean {
    if (!snapshot) {
      this.rejectedHash = hash;
      this.reject(diagnostics);
      return false;
    }
    this.snapshot = snapshot;
    this.lastDiagnostics = [];
    this.emit('reloaded', snapshot);
    return true;
  }

  /** The files, or undefined when they kept changing under the reader (a file renamed or deleted mid-read). */
  private async readFiles(): Promise<SnapshotFiles | undefined> {
    for (let attempt = 1; ; attempt++) {
      try {
        return readSnapshotFiles(this.catalogDir, this.rulesDir);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || attempt === 3) {
          const diagnostic = {
            file: (e as NodeJS.ErrnoException).path ?? this.catalogDir,
            line: 1,
            column: 1,
            message: (e as Error).message,
          };
          // Checked every interval: report a lasting read error once, not twice a second.
          if (this.lastDiagnostics[0]?.message !== diagnostic.message) this.reject([diagnostic]);
          this.rejectedHash = undefined;
          this.readFailed = true;
          return undefined;
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
  }

  private reject(diagnostics: Diagnostic[]): void {
    this.lastDiagnostics = diagnostics;
    const first = diagnostics[0];
    if (first)
      this.lastError = {
        location: `${first.file}:${first.line}:${first.column}`,
        message: first.message,
        at: new Date().toISOString(),
      };
    this.emit('rejected', diagnostics);
  }

  close(): void {
    clearTimeout(this.debounce);
    clearInterval(this.interval);
    this.directories?.close();
  }
}
