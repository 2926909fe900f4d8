import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A file's time stamps are as coarse as the kernel's clock tick (and a network file system's clock may lag ours): an
 * edit this close after a read may carry the time stamp the read already saw. Files that recent are read again.
 */
const RACY_MS = 1000;

/** What the directories' entries look like now: each path's inode, size and times, in a line each. */
export interface FileStats {
  signature: string;
  /** The latest modification or change time of any entry (ms since the epoch). */
  newestMs: number;
}

/**
 * The stat of every entry under the roots (hidden ones aside, as the catalog reader skips them) and of the roots
 * themselves: a directory renamed over a root or a switched symbolic link changes its inode. Reading and hashing the
 * files costs far more than this, and is needed only when this changed or an entry is too recent to tell (isRacy).
 */
export function fileStats(roots: string[]): FileStats {
  const lines: string[] = [];
  let newestMs = 0;
  const visit = (path: string) => {
    let st: ReturnType<typeof statSync>;
    try {
      st = statSync(path, { bigint: true });
    } catch {
      lines.push(`${path} -`);
      return;
    }
    // A directory's own times move with any entry, hidden ones too; its entries' names and stats tell what counts.
    if (st.isDirectory()) {
      lines.push(`${path} ${st.ino} dir`);
      for (const name of namesIn(path)) visit(join(path, name));
      return;
    }
    lines.push(`${path} ${st.ino} ${st.size} ${st.mtimeNs} ${st.ctimeNs}`);
    newestMs = Math.max(newestMs, Number(st.mtimeMs), Number(st.ctimeMs));
  };
  for (const root of roots) visit(root);
  return { signature: lines.join('\n'), newestMs };
}

/** Whether an entry changed so shortly before `readAt` that a later edit could leave the same stat. */
export function isRacy(stats: FileStats, readAt: number): boolean {
  return stats.newestMs >= readAt - RACY_MS;
}

function namesIn(dir: string): string[] {
  try {
    return readdirSync(dir)
      .filter((name) => !name.startsWith('.'))
      .sort();
  } catch {
    return [];
  }
}
