import { spawn } from 'node:child_process';
import { join } from 'node:path';

/**
 * A benchmark that starts a service of its own (bench/hls.ts, bench/admission.ts) in a process of its own, as its
 * `npm run bench:…` runs it; its output goes to this one's.
 */
export function runBenchScript(root: string, script: string, writeDocs: boolean, signal: AbortSignal): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(root, script)], {
    cwd: root,
    env: { ...process.env, ...(!writeDocs && { NO_WRITE_DOCS: '1' }) },
    stdio: ['ignore', 'inherit', 'inherit'],
    signal,
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${script} exited with ${code}`))));
  });
}

/** The HLS benchmark: CPU per rendition, HLS listeners per core, the listen page's time to first sound. */
export function runHlsSection(root: string, writeDocs: boolean, signal: AbortSignal): Promise<void> {
  return runBenchScript(root, 'bench/hls.ts', writeDocs, signal);
}

/** Admission at the scale of a host: 2000 listeners at once on 40 streams of one host. */
export function runAdmissionSection(root: string, writeDocs: boolean, signal: AbortSignal): Promise<void> {
  return runBenchScript(root, 'bench/admission.ts', writeDocs, signal);
}
