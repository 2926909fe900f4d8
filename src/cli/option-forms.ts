import { parseArgs } from 'node:util';

/** The flags a command's usage line gives a value (`--name NAME`, `--role api|host|all`); the others are switches. */
export function flagsWithValue(help: string): Set<string> {
  const usageLine = help.split('\n')[0];
  return new Set([...usageLine.matchAll(/(--[a-z][a-z-]*) [A-Za-z]/g)].map((m) => m[1]));
}

/**
 * The arguments with every `--flag=value` written as `--flag value` (Node's parseArgs reads both), so that each
 * command reads one form: the arguments, or what is wrong (a switch given a value).
 */
export function spelledApart(args: string[], help: string): { args: string[] } | { problem: string } {
  const withValue = flagsWithValue(help);
  const { tokens } = parseArgs({ args, strict: false, allowPositionals: true, tokens: true });
  const out: string[] = [];
  let next = 0;
  for (const token of tokens) {
    if (token.index < next) continue;
    if (token.kind === 'option-terminator') return { args: [...out, ...args.slice(token.index)] };
    next = token.index + 1;
    if (token.kind !== 'option' || !token.inlineValue || !token.rawName.startsWith('--')) {
      out.push(args[token.index]);
      continue;
    }
    if (!withValue.has(token.rawName)) return { problem: `${token.rawName} takes no value, got ${args[token.index]}` };
    out.push(token.rawName, token.value ?? '');
  }
  return { args: out };
}
