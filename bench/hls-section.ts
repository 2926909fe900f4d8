import { spawn } from 'node:child_process';
import { join } from 'node:path';

/**
 * The HLS benchmark (bench/hls.ts: CPU per rendition, HLS listeners per core, the listen page's time to first sound)
 * in a process of its own, on a service of its own, as `npm run bench:hls` runs it; its output goes to this one's.
 */
export function runHlsSection(root: string, writeDocs: boolean, signal: AbortSignal): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'bench/hls.ts')], {
    cwd: root,
    env: { ...process.env, ...(!writeDocs && { NO_WRITE_DOCS: '1' }) },
    stdio: ['ignore', 'inherit', 'inherit'],
    signal,
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`bench/hls.ts exited with ${code}`))));
  });
}
