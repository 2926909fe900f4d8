import { createRequire } from 'node:module';
import type PinoPretty from 'pino-pretty';

// Loaded only for a person at a terminal: a service logging JSON (every test's) starts without it.
const requireModule = createRequire(import.meta.url);

/**
 * One short line per entry on stderr: time, level, message, then the entry's fields as key=value (an error as its
 * message only). `hidden`: fields every line carries (the logger's base), not worth repeating.
 */
export function prettyStream(hidden: string[]) {
  const skip = new Set(['level', 'time', 'msg', 'pid', 'hostname', ...hidden]);
  const pretty: typeof PinoPretty = requireModule('pino-pretty');
  return pretty({
    destination: 2,
    sync: true,
    colorize: Boolean(process.stderr.isTTY),
    translateTime: 'HH:MM:ss',
    messageKey: 'msg',
    hideObject: true,
    messageFormat: (entry) => {
      const fields = Object.entries(entry)
        .filter(([key]) => !skip.has(key))
        .map(([key, value]) => `${key}=${fieldText(value)}`);
      return [String(entry.msg ?? ''), ...fields].join('  ');
    },
  });
}

function fieldText(value: unknown): string {
  if (typeof value === 'string') return /\s/.test(value) || value === '' ? JSON.stringify(value) : value;
  if (value && typeof value === 'object' && 'message' in value)
    return JSON.stringify((value as { message: unknown }).message);
  return JSON.stringify(value);
}
