import { jsonLogger } from '../log/index.js';
import { option, print, usageError, type Command } from './command-line.js';
import { SERVE_ROLES, type ServeRole } from './config.js';
import { helpFor } from './help.js';
import { readySummary } from './ready-summary.js';
import { stopRequested } from './stop-signals.js';

export const serveCommands: Record<string, Command> = {
  async serve(settings, args) {
    const role = option(args, '--role') ?? 'all';
    if (!(SERVE_ROLES as readonly string[]).includes(role)) {
      return usageError(`--role must be one of ${SERVE_ROLES.join(', ')}, got ${role}`, helpFor('serve'));
    }
    const config = { ...settings, role: role as ServeRole };
    const began = performance.now();
    const logOptions = config.log;
    const log = jsonLogger({ service: 'agent-audio-api' }, logOptions);
    const stop = stopRequested((signal) => {
      log.warn({ signal }, 'second stop signal: exiting now (PostgreSQL is told to shut down fast)');
      process.exit(130);
    });
    // @x402/evm leaves a rejected promise unawaited when the chain is unreachable (its asset cache); a server must not
    // die of it.
    process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled promise rejection'));
    // Loaded here only: the other commands (audit, keys, catalog…) start without the service's modules, in a
    // fraction of the time.
    const { serve } = await import('./serve/index.js');
    const service = await serve(config, log);
    const summary = readySummary(config, service, (performance.now() - began) / 1000);
    if (logOptions.format === 'pretty') print(summary.lines.join('\n'));
    else {
      print(summary.lines.slice(0, 2).join('\n'));
      log.info(summary.fields, 'ready');
    }
    const { signal, at } = await stop;
    log.info({ signal }, 'stopping');
    await service.stop();
    const seconds = ((performance.now() - at) / 1000).toFixed(1);
    if (logOptions.format === 'json') log.info({ signal, seconds }, 'stopped');
    print(`stopped (${signal}) in ${seconds} s`);
    return 0;
  },
};
