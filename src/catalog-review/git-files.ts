import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { SnapshotFiles } from '../pricing/index.js';

const run = promisify(execFile);

/** catalog/ and rules/ as they were at a git commit, read with `git show` in the repository that holds each folder. */
export async function snapshotFilesAtGitRef(ref: string, catalogDir: string, rulesDir: string): Promise<SnapshotFiles> {
  const files: SnapshotFiles = {};
  for (const [prefix, dir, pattern] of [
    ['catalog', catalogDir, /\.ya?ml$/],
    ['rules', rulesDir, /\.json$/],
  ] as const) {
    const git = (...args: string[]) =>
      run('git', ['-C', dir, ...args], { maxBuffer: 64 * 1024 * 1024 }).then((r) => r.stdout);
    await git('rev-parse', '--verify', '--quiet', `${ref}^{commit}`).catch(() => {
      throw new Error(
        `${ref} is not a commit in the git repository of ${dir}: give a branch, tag or commit (e.g. HEAD, ` +
          `main), or a folder that holds catalog/ and rules/`,
      );
    });
    // Paths relative to the folder, as ls-tree shows them when run inside it.
    const listed = (await git('ls-tree', '-r', '--name-only', ref, '.')).split('\n').filter((p) => pattern.test(p));
    for (const path of listed) files[`${prefix}/${path}`] = await git('show', `${ref}:./${path}`);
  }
  return files;
}
