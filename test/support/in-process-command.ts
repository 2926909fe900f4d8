import type { Command } from '../../src/cli/command-line.js';
import { configFromEnv } from '../../src/cli/config.js';
import { capture } from './catalog-command.js';
import type { CliResult } from './service.js';

/**
 * A CLI command run in this process, as the CLI's main() calls it once it has parsed the command line: the same
 * function on a configuration read from the same variables, its stdout and stderr captured. For the variations a real
 * CLI run (test/support/service.ts cli()) of the same file covers the wiring of: a CLI process spends about half a
 * second of CPU loading the bundle before the command starts. Runs one at a time (the capture is of this process's
 * stdout); a thrown error is returned as main() reports it (exit 1, "error: …").
 */
export function runInProcess(command: Command, args: string[], env: Record<string, string>): Promise<CliResult> {
  const run = queue.then(() => runNow(command, args, env));
  queue = run.catch(() => undefined);
  return run;
}

let queue: Promise<unknown> = Promise.resolve();

/** `GROUP NAME ARGS…` (audit verify, hosts drain…) from the group's commands, in this process. */
export function groupCommandInProcess(
  commands: Record<string, Command>,
  argv: string[],
  env: Record<string, string>,
): Promise<CliResult> {
  const [group, name, ...args] = argv;
  const command = commands[`${group} ${name}`];
  if (!command) throw new Error(`no command ${group} ${name}`);
  return runInProcess(command, args, env);
}

async function runNow(command: Command, args: string[], env: Record<string, string>): Promise<CliResult> {
  const captured = { stdout: '', stderr: '' };
  const restore = capture(captured);
  let code: number;
  try {
    code = await command(configFromEnv({ ...process.env, ...env }, false), args);
  } catch (e) {
    process.stderr.write(`error: ${(e as Error).message}\n`);
    code = 1;
  } finally {
    restore();
  }
  return { code, ...captured };
}
