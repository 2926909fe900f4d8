import { pino } from 'pino';
import { prettyStream } from './pretty.js';

export type Fields = Record<string, unknown>;

export interface Logger {
  /** Detail for whoever investigates (dependency output, for one); written only with LOG_LEVEL=debug. */
  debug?(fields: Fields, message: string): void;
  info(fields: Fields, message: string): void;
  warn(fields: Fields, message: string): void;
  error(fields: Fields, message: string): void;
}

/** `json`: one JSON document per line, for machines; `pretty`: short readable lines, for a person at a terminal. */
export type LogFormat = 'json' | 'pretty';

export interface LogOptions {
  format?: LogFormat;
  /** trace, debug, info (default), warn, error, fatal or silent. */
  level?: string;
}

/** Anything that could carry a secret is replaced before it is written, wherever it appears. */
const secrets = [
  'api_key',
  'private_key',
  'privateKey',
  'password',
  'pass',
  'secret',
  'authorization',
  'database_url',
  'broadcast_url',
  'source_password',
  'payment_signature',
];

/** Log lines on stderr (pino), so stdout stays free for command output. */
export function jsonLogger(base: Fields = {}, options: LogOptions = {}): Logger {
  const pretty = options.format === 'pretty';
  return pino(
    {
      base,
      level: options.level ?? 'info',
      timestamp: pino.stdTimeFunctions.isoTime,
      messageKey: 'msg',
      formatters: { level: (label) => ({ level: label }) },
      redact: {
        paths: [...secrets, ...secrets.map((s) => `*.${s}`), ...secrets.map((s) => `*.*.${s}`)],
        censor: '[redacted]',
      },
    },
    pretty ? prettyStream(Object.keys(base)) : pino.destination({ fd: 2, sync: false }),
  );
}

/**
 * The same logger for lines whose fields are known, flat and free of secrets (the per-request line): its redaction
 * looks at top-level fields only. The wildcard paths (every field two levels deep) cost ~3 % of a 402's CPU.
 */
export function flatLineLogger(log: Logger): Logger {
  const child = (log as Partial<Pick<pino.Logger, 'child'>>).child;
  return typeof child === 'function' ? child.call(log, {}, { redact: { paths: secrets, censor: '[redacted]' } }) : log;
}
