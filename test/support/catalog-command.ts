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
  const restore = capture(captured);
  let code: number;
  try {
    code = await command(config, args).catch((e: Error) => {
      process.stderr.write(`error: ${e.message}\n`);
      return 1;
    });
  } finally {
    restore();
  }
  return { code, ...captured };
}

/**
 * Collects the text the command prints. Only strings are taken: the test runner's own report to its parent goes
 * through process.stdout as serialized buffers, and passes through untouched.
 */
export function capture(into: { stdout: string; stderr: string }): () => void {
  const streams = { stdout: process.stdout, stderr: process.stderr };
  const originals = { stdout: process.stdout.write, stderr: process.stderr.write };
  for (const key of ['stdout', 'stderr'] as const) {
    const original = originals[key];
    streams[key].write = function (this: NodeJS.WriteStream, chunk: unknown, ...rest: unknown[]) {
      if (typeof chunk !== 'string') return (original as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
      into[key] += chunk;
      return true;
    } as typeof process.stdout.write;
  }
  return () => {
    process.stdout.write = originals.stdout;
    process.stderr.write = originals.stderr;
  };
}
