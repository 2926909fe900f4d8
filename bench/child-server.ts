import { spawn } from 'node:child_process';
import { join } from 'node:path';

export interface ChildServer {
  baseUrl: string;
  pid: number;
  stop(): Promise<void>;
}

/** Starts bench/bare-koa.ts in a process of its own (node --import tsx), as the service has one of its own. */
export async function startBareKoa(root: string, productsFile: string, timeoutMs = 20_000): Promise<ChildServer> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'bench/bare-koa.ts'), productsFile], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stderr.on('data', (d) => { output += d; });
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
      const timer = setTimeout(() => reject(new Error(`bare Koa did not start:\n${output}`)), timeoutMs);
      child.stdout.on('data', (d) => {
        const m = /listening (\d+)/.exec(String(d));
        if (m) { clearTimeout(timer); resolve(Number(m[1])); }
      });
      void exited.then(() => { clearTimeout(timer); reject(new Error(`bare Koa exited with ${child.exitCode}:\n${output}`)); });
    });
    return { baseUrl: `http://127.0.0.1:${port}`, pid: child.pid!, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
