import type { ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';

export interface ChildOutput {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * A child's exit code and all it wrote, once it closes; after timeoutMs it is killed and the promise rejects, naming
 * it by `label` with what it wrote to stderr so far.
 */
export function outputOf(
  child: ChildProcessByStdio<null, Readable, Readable>,
  label: string,
  timeoutMs: number,
): Promise<ChildOutput> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${label} timed out\n${stderr}`));
    }, timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
