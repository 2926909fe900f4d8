import { pino } from 'pino';

export type Fields = Record<string, unknown>;

export interface Logger {
  info(fields: Fields, message: string): void;
  warn(fields: Fields, message: string): void;
  error(fields: Fields, message: string): void;
}

/** Anything that could carry a secret is replaced before it is written, wherever it appears. */
const secrets = ['api_key', 'private_key', 'privateKey', 'password', 'pass', 'secret', 'authorization', 'database_url', 'broadcast_url', 'source_password', 'payment_signature'];

/** JSON lines on stderr (pino), so stdout stays free for command output. */
export function jsonLogger(base: Fields = {}): Logger {
  return pino({
    base,
    timestamp: pino.stdTimeFunctions.isoTime,
    messageKey: 'msg',
    formatters: { level: (label) => ({ level: label }) },
    redact: { paths: [...secrets, ...secrets.map((s) => `*.${s}`), ...secrets.map((s) => `*.*.${s}`)], censor: '[redacted]' },
  }, pino.destination({ fd: 2, sync: false }));
}
