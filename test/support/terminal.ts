import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { root } from './service.js';

const bin = join(root, 'bin/agent-audio.mjs');

export interface ServeProcess {
  child: ChildProcess;
  /** stdout (under a pseudo-terminal: everything the terminal shows). */
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code; `exitedAt` is then performance.now() of the exit. */
  exited: Promise<number | null>;
  exitedAt(): number;
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<void>;
  /** Kills the whole process group (cleanup after a failed test). */
  kill(): void;
}

/**
 * `serve` in a process group of its own (as a shell runs a foreground job), so that a test can signal the whole
 * group as Ctrl-C does. With `terminal`, under a pseudo-terminal (util-linux `script`, whose shell is $SHELL or
 * /bin/sh: `exec` keeps that shell out of the foreground group, or Ctrl-C kills it too and it exits 130): stdout and
 * stderr are a TTY, and writing "\x03" to `child.stdin` is a real Ctrl-C. `entry` is node's arguments before `serve`:
 * bin/agent-audio.mjs by default, as `npm start` runs it, or the tests' prebuilt entry (serveEntry).
 */
export function spawnServe(
  env: Record<string, string>,
  options: { terminal?: boolean; entry?: string[] } = {},
): ServeProcess {
  const fullEnv = { ...process.env, PORT: '0', HOST: '127.0.0.1', ...env };
  const entry = options.entry ?? [bin];
  const command = [process.execPath, ...entry].map((word) => JSON.stringify(word)).join(' ');
  const child = options.terminal
    ? spawn('script', ['-qfec', `exec ${command} serve`, '/dev/null'], {
        cwd: root,
        env: fullEnv,
        detached: true,
        stdio: ['pipe', 'pipe', 'pipe'],
      })
    : spawn(process.execPath, [...entry, 'serve'], {
        cwd: root,
        env: fullEnv,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
  let stdout = '';
  let stderr = '';
  let exitedAt = 0;
  child.stdout!.on('data', (d) => {
    stdout += d;
  });
  child.stderr!.on('data', (d) => {
    stderr += d;
  });
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      exitedAt = performance.now();
      resolve(code);
    }),
  );
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    exitedAt: () => exitedAt,
    async waitFor(pattern, timeoutMs = 90_000) {
      const deadline = Date.now() + timeoutMs;
      while (!pattern.test(stdout)) {
        if (exitedAt) throw new Error(`serve exited before printing ${pattern}:\n${stdout}\n${stderr}`);
        if (Date.now() > deadline) throw new Error(`serve did not print ${pattern} in time:\n${stdout}\n${stderr}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    kill() {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    },
  };
}

/** Text without terminal colour codes and carriage returns. */
export function plain(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/\x1b\[[0-9;]*m/g, '').replace(/\r/g, '');
}
