import { EventEmitter } from 'node:events';
import { watch, type FSWatcher } from 'node:fs';
import { formatDiagnostic, type Diagnostic } from '../catalog/index.js';
import { readSnapshotFiles, snapshotHash } from './files.js';
import { openSnapshot, type Snapshot } from './snapshot.js';

export class CatalogInvalidError extends Error {
  constructor(readonly diagnostics: Diagnostic[]) {
    super(`the catalog or rules are invalid:\n${diagnostics.map(formatDiagnostic).join('\n')}`);
  }
}

/**
 * The snapshot being served, reloaded when a file under catalog/ or rules/ changes.
 * An invalid edit keeps the last good snapshot and reports its errors. Emits 'reloaded' (snapshot) and 'rejected' (diagnostics).
 */
export class LiveSnapshot extends EventEmitter {
  private watchers: FSWatcher[] = [];
  private timer?: NodeJS.Timeout;
  private reloading = Promise.resolve();
  lastDiagnostics: Diagnostic[] = [];

  private constructor(private snapshot: Snapshot, private readonly catalogDir: string, private readonly rulesDir: string) {
    super();
  }

  static async open(catalogDir: string, rulesDir: string): Promise<LiveSnapshot> {
    const { snapshot, diagnostics } = await openSnapshot(await readSnapshotFiles(catalogDir, rulesDir));
    if (!snapshot) throw new CatalogInvalidError(diagnostics);
    return new LiveSnapshot(snapshot, catalogDir, rulesDir);
  }

  get current(): Snapshot {
    return this.snapshot;
  }

  watch(debounceMs = 150): void {
    for (const dir of [this.catalogDir, this.rulesDir]) {
      this.watchers.push(watch(dir, { recursive: true }, () => {
        clearTimeout(this.timer);
        this.timer = setTimeout(() => void this.reload(), debounceMs);
      }));
    }
  }

  /** Reads the files again; returns true when a new snapshot is now served. */
  reload(): Promise<boolean> {
    const run = this.reloading.then(() => this.load());
    this.reloading = run.then(() => undefined, () => undefined);
    return run;
  }

  private async load(): Promise<boolean> {
    let files;
    try {
      files = await readSnapshotFiles(this.catalogDir, this.rulesDir);
    } catch (e) {
      this.reject([{ file: this.catalogDir, line: 1, column: 1, message: (e as Error).message }]);
      return false;
    }
    if (snapshotHash(files) === this.snapshot.hash) {
      this.lastDiagnostics = [];
      return false;
    }
    const { snapshot, diagnostics } = await openSnapshot(files);
    if (!snapshot) {
      this.reject(diagnostics);
      return false;
    }
    this.snapshot = snapshot;
    this.lastDiagnostics = [];
    this.emit('reloaded', snapshot);
    return true;
  }

  private reject(diagnostics: Diagnostic[]): void {
    this.lastDiagnostics = diagnostics;
    this.emit('rejected', diagnostics);
  }

  close(): void {
    clearTimeout(this.timer);
    for (const w of this.watchers) w.close();
    this.watchers = [];
  }
}
