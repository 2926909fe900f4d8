import { doctorCommands } from '../../src/cli/doctor-command.js';
import { configFromEnv } from '../../src/cli/config.js';
import { capture } from './catalog-command.js';
import type { CliResult } from './service.js';

/**
 * `doctor` run in this process, as the CLI's main() calls it once it has parsed the command line: the same function
 * on a configuration read from the same variables, its stdout and stderr captured. For the variations of the
 * deployment a real CLI run (test/support/service.ts cli()) of the same file covers the wiring of: a CLI process
 * spends about half a second of CPU loading the bundle before the checks start. Runs one at a time (the capture is of
 * this process's stdout); a thrown error is returned as main() reports it (exit 1, "error: …").
 */
export function doctorCommand(args: string[], env: Record<string, string>): Promise<CliResult> {
  const run = queue.then(() => doctorNow(args, env));
  queue = run.catch(() => undefined);
  return run;
}

let queue: Promise<unknown> = Promise.resolve();

async function doctorNow(args: string[], env: Record<string, string>): Promise<CliResult> {
  const captured = { stdout: '', stderr: '' };
  const restore = capture(captured);
  let code: number;
  try {
    const config = configFromEnv({ ...process.env, ...env }, false);
    code = await doctorCommands.doctor(config, args);
  } catch (e) {
    process.stderr.write(`error: ${(e as Error).message}\n`);
    code = 1;
  } finally {
    restore();
  }
  return { code, ...captured };
}
