import { auditCommands } from '../../src/cli/audit-commands.js';
import { runInProcess } from './in-process-command.js';
import type { CliResult } from './service.js';

/** `audit SUBCOMMAND ARGS…` in this process (support/in-process-command.ts). */
export function auditCommand(argv: string[], env: Record<string, string>): Promise<CliResult> {
  const [group, name, ...args] = argv;
  const command = auditCommands[`${group} ${name}`];
  if (!command) throw new Error(`no audit command ${group} ${name}`);
  return runInProcess(command, args, env);
}
