import { AsyncLocalStorage } from 'node:async_hooks';
import { catalogCommands } from '../../src/cli/catalog-commands.js';
import { configFromEnv } from '../../src/cli/config.js';
import type { CliResult } from './service.js';

/**
 * Runs one `catalog …` command (check, diff, preview) in this process, as the CLI's main() calls it once it has
 * parsed the command line: the same function on a configuration read from the same variables, its stdout and stderr
 * captured. For the variations of a command whose wiring one real CLI run (test/support/service.ts cli()) covers:
 * it saves the second or so a new process takes to load the catalog's modules. A thrown error is returned as main()
 * reports it (exit 1, "error: …").
 */
export async function catalogCommand(argv: string[], env: Record<string, string>): Promise<CliResult> {
  const [group, name, ...args] = argv;
  const command = catalogCommands[`${group} ${name}`];
  if (!command) throw new Error(`no catalog command ${group} ${name}`);
  const config = configFromEnv({ ...process.env, ...env }, false);
  const captured = { stdout: '', stderr: '' };
  const code = await capturing(captured, () =>
    command(config, args).catch((e: Error) => {
      process.stderr.write(`error: ${e.message}\n`);
      return 1;
    }),
  );
  return { code, ...captured };
}

/**
 * Runs `run` with the text it prints collected into `into`. Only writes made from within `run`'s asynchronous context
 * are taken (tests of one file run side by side, and their console.log goes on to the runner); only strings: the test
 * runner's own report to its parent goes through process.stdout as serialized buffers, and passes through untouched.
 */
export function capturing<T>(into: Output, run: () => Promise<T>): Promise<T> {
  installCapture();
  return outputs.run(into, run);
}

type Output = { stdout: string; stderr: string };

const outputs = new AsyncLocalStorage<Output>();
let installed = false;

function installCapture(): void {
  if (installed) return;
  installed = true;
  for (const key of ['stdout', 'stderr'] as const) {
    const original = process[key].write;
    process[key].write = function (this: NodeJS.WriteStream, chunk: unknown, ...rest: unknown[]) {
      const into = outputs.getStore();
      if (!into || typeof chunk !== 'string')
        return (original as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
      into[key] += chunk;
      return true;
    } as typeof process.stdout.write;
  }
}
