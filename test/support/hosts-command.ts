import { hostCommands } from '../../src/cli/host-commands.js';
import { groupCommandInProcess } from './in-process-command.js';
import type { CliResult, Service } from './service.js';

/**
 * `hosts SUBCOMMAND ARGS…` against `service`'s database, in this process (support/in-process-command.ts): for the
 * drains that steer a purchase onto a host and the listings a test waits on; test/host-pool.test.ts runs the real CLI.
 */
export function hostsCommand(service: Pick<Service, 'env'>, argv: string[]): Promise<CliResult> {
  return groupCommandInProcess(hostCommands, argv, service.env);
}
