/** Report progress at most this often (and at the end). */
const INTERVAL_MS = 1000;

export interface Progress {
  /** Whether progress is shown at all: with --progress, or by default when stderr is a terminal. */
  enabled: boolean;
  /**
   * Writes the line to stderr if enabled and it is time (or `last`); stdout, and so --json output, is never touched.
   */
  report(line: string, last?: boolean): void;
}

export function progressReporter(args: string[], stderrIsTerminal = Boolean(process.stderr.isTTY)): Progress {
  const enabled = args.includes('--progress') || stderrIsTerminal;
  let lastReport = 0;
  return {
    enabled,
    report(line, last = false) {
      if (!enabled || (!last && Date.now() - lastReport < INTERVAL_MS)) return;
      lastReport = Date.now();
      process.stderr.write(`${line}\n`);
    },
  };
}
