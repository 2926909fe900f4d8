import { spawnSync } from 'node:child_process';

export const INSTALL_SYSTEM_DEPS = 'sh scripts/install-system-deps.sh';

/**
 * The system programs these tests run (by default icecast2 and ffmpeg) must be installed: a machine without them
 * fails the file with the command that installs them, it never reports the tests as skipped and the suite as green.
 */
export function requireStreamingTools(tools: readonly string[] = ['icecast2', 'ffmpeg']): void {
  const missing = tools.filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0);
  if (missing.length) {
    const what = `${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} not installed`;
    throw new Error(`${what}; these tests need them: run \`${INSTALL_SYSTEM_DEPS}\``);
  }
}
