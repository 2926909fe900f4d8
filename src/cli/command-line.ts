import type { Config } from './config.js';
import { openDatabase } from './database-access.js';
import { usage } from './help.js';

/** A command of the command line: its exit code. */
export type Command = (config: Config, args: string[]) => Promise<number>;

export const print = (value: unknown) =>
  process.stdout.write(`${typeof value === 'string' ? value : JSON.stringify(value, null, 2)}\n`);

export function option(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

export function options(args: string[], name: string): string[] {
  return args.flatMap((a, i) => (a === name && args[i + 1] !== undefined ? [args[i + 1]] : []));
}

/** A time option; null (after saying why) when it is not a date. */
export function dateOption(args: string[], name: string): Date | undefined | null {
  const text = option(args, name);
  if (text === undefined) return undefined;
  const date = new Date(text);
  if (Number.isNaN(date.getTime())) {
    process.stderr.write(`${name} needs a date such as 2026-11-23 or 2026-11-23T15:00:00Z, got ${text}\n`);
    return null;
  }
  return date;
}

export type CommandDatabase = Awaited<ReturnType<typeof openDatabase>>['db'];
export { withDatabase } from './database-access.js';

/** Usage errors (an unknown command, a missing subcommand) exit with 2 after saying what was wrong, then the usage. */
export function usageError(problem: string, help = usage): number {
  process.stderr.write(`${problem}\n\n${help}\n`);
  return 2;
}
