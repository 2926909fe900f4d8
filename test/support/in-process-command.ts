import type { Command } from '../../src/cli/command-line.js';
import { configFromEnv } from '../../src/cli/config.js';
import { capturing } from './catalog-command.js';
import type { CliResult } from './service.js';

/**
 * A CLI command run in this process, as the CLI's main() calls it once it has parsed the command line: the same
 * function on a configuration read from the same variables, its stdout and stderr captured. For the variations a real
 * CLI run (test/support/service.ts cli()) of the same file covers the wiring of: a CLI process spends about half a
 * second of CPU loading the bundle before the command starts. Only what the command prints is captured,
 * whatever else this process prints meanwhile; a thrown error is returned as main() reports it (exit 1, "error: …").
 */
export async function runInProcess(command: Command, args: string[], env: Record<string, string>): Promise<CliResult> {
  const captured = { stdout: '', stderr: '' };
  const code = await capturing(captured, async () => {
    try {
      return await command(configFromEnv({ ...process.env, ...env }, false), args);
    } catch (e) {
      process.stderr.write(`error: ${(e as Error).message}\n`);
      return 1;
    }
  });
  return { code, ...captured };
}

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
