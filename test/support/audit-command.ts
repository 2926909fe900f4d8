import { auditCommands } from '../../src/cli/audit-commands.js';
import { groupCommandInProcess } from './in-process-command.js';
import type { CliResult } from './service.js';

/** `audit SUBCOMMAND ARGS…` in this process (support/in-process-command.ts). */
export function auditCommand(argv: string[], env: Record<string, string>): Promise<CliResult> {
  return groupCommandInProcess(auditCommands, argv, env);
}
