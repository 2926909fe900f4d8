import { spawn } from 'node:child_process';
import { join } from 'node:path';

export interface ChildServer {
  baseUrl: string;
  pid: number;
  stop(): Promise<void>;
}

/**
 * Starts a bench server script (node --import tsx <root>/<script> ...args) in a process of its own and waits for its
 * "listening <port>" line on stdout. stop() sends SIGTERM, then SIGKILL after 5 s; it is idempotent.
 */
export async function startChildScript(
  root: string,
  script: string,
  args: string[] = [],
  timeoutMs = 20_000,
): Promise<ChildServer> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(root, script), ...args], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stderr.on('data', (d) => {
    output = (output + d).slice(-8000);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let stopped: Promise<void> | undefined;
  const stop = () => {
    if (!stopped) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      stopped = exited.finally(() => clearTimeout(timer));
    }
    return stopped;
  };
  try {
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${script} did not start:\n${output}`)), timeoutMs);
      child.stdout.on('data', (d) => {
        const m = /listening (\d+)/.exec(String(d));
        if (m) {
          clearTimeout(timer);
          resolve(Number(m[1]));
        }
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`${script} exited with ${child.exitCode}:\n${output}`));
      });
    });
    return { baseUrl: `http://127.0.0.1:${port}`, pid: child.pid!, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
