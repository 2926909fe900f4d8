export type Fields = Record<string, unknown>;

export interface Logger {
  info(fields: Fields, message: string): void;
  warn(fields: Fields, message: string): void;
  error(fields: Fields, message: string): void;
}

/** One JSON object per line on stderr, so stdout stays free for command output. */
export function jsonLogger(base: Fields = {}): Logger {
  const write = (level: string) => (fields: Fields, message: string) => {
    const entry: Fields = { time: new Date().toISOString(), level, msg: message, ...base, ...fields };
    if (entry.err instanceof Error) entry.err = { message: entry.err.message, stack: entry.err.stack };
    process.stderr.write(`${JSON.stringify(entry)}\n`);
  };
  return { info: write('info'), warn: write('warn'), error: write('error') };
}
