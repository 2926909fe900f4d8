import { doctorCommands } from '../../src/cli/doctor-command.js';
import { runInProcess } from './in-process-command.js';
import type { CliResult } from './service.js';

/** `doctor ARGS…` in this process (support/in-process-command.ts). */
export function doctorCommand(args: string[], env: Record<string, string>): Promise<CliResult> {
  return runInProcess(doctorCommands.doctor, args, env);
}
