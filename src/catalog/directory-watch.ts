import { readdirSync, statSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname, join } from 'node:path';

/** A directory to watch; `only`: the names whose events count (undefined: every name). */
interface Watched {
  inode: number;
  only?: Set<string>;
}

/**
 * Calls onChange when anything under some root directories is written, created, renamed or deleted.
 * Each directory gets its own watch, not one `fs.watch(root, { recursive: true })`: on Linux, Node 20 builds that one
 * from a watch per file inode, so after an editor renames a new file over a watched one, that file's later edits make
 * no event at all. A directory's watch names any child whatever its inode. Each root's parent is watched for the root's
 * own name: a deployment replaces the whole directory (renaming a copy over it or switching a symlink).
 */
export class DirectoryWatch {
  private watchers = new Map<string, { watcher: FSWatcher } & Watched>();
  private arming = Promise.resolve();
  private closed = false;

  constructor(
    private readonly roots: string[],
    private readonly onChange: () => void,
  ) {}

  /** Watches every directory now under the roots (anew where one was replaced); stops watching those gone. */
  rearm(): Promise<void> {
    this.arming = this.arming.then(() => this.arm()).catch(() => {});
    return this.arming;
  }

  close(): void {
    this.closed = true;
    for (const { watcher } of this.watchers.values()) watcher.close();
    this.watchers.clear();
  }

  private arm(): void {
    const wanted = this.directories();
    if (this.closed) return;
    for (const [dir, existing] of this.watchers) {
      const want = wanted.get(dir);
      if (want && want.inode === existing.inode && sameNames(want.only, existing.only)) continue;
      existing.watcher.close();
      this.watchers.delete(dir);
    }
    for (const [dir, want] of wanted) if (!this.watchers.has(dir)) this.start(dir, want);
  }

  /** The roots' directories and their parents, as they are now (read synchronously, as the catalog's files are). */
  private directories(): Map<string, Watched> {
    const found = new Map<string, Watched>();
    for (const root of this.roots) addTree(root, found);
    for (const root of this.roots) {
      const parent = dirname(root);
      const inode = inodeOf(parent);
      const known = found.get(parent);
      if (inode === undefined || (known && !known.only)) continue;
      found.set(parent, { inode, only: new Set([...(known?.only ?? []), basename(root)]) });
    }
    return found;
  }

  private start(dir: string, want: Watched): void {
    try {
      const watcher = watch(dir, (_event, name) => {
        if (!want.only || (name !== null && want.only.has(String(name)))) this.onChange();
      });
      watcher.on('error', () => {
        watcher.close();
        if (this.watchers.get(dir)?.watcher === watcher) this.watchers.delete(dir);
      });
      this.watchers.set(dir, { watcher, ...want });
    } catch {
      /* the directory vanished meanwhile: the next rearm tries again */
    }
  }
}

/** The directory and every directory below it (hidden ones aside, as the catalog reader skips them). */
function addTree(dir: string, found: Map<string, Watched>): void {
  const inode = inodeOf(dir);
  if (inode === undefined) return;
  found.set(dir, { inode });
  for (const entry of entriesOf(dir))
    if (entry.isDirectory() && !entry.name.startsWith('.')) addTree(join(dir, entry.name), found);
}

function entriesOf(dir: string) {
  try {
    return readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
}

function inodeOf(path: string): number | undefined {
  try {
    return statSync(path).ino;
  } catch {
    return undefined;
  }
}

function sameNames(a?: Set<string>, b?: Set<string>): boolean {
  if (!a || !b) return a === b;
  return a.size === b.size && [...a].every((name) => b.has(name));
}
