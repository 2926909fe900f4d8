import {
  drainHost,
  hostPoolReport,
  removeHost,
  undrainHost,
  type HostChange,
  type HostReport,
} from '../hosts/index.js';
import type { Database } from '../store/index.js';
import { withDatabase, type Command } from './command-line.js';

/** One line per host for a terminal. */
function hostLine(h: HostReport): string {
  const age = h.heartbeat_age_seconds === null ? 'never' : `${h.heartbeat_age_seconds} s ago`;
  const state = h.state === 'up' && !h.live ? 'up (no heartbeat: not placed on)' : h.state;
  const cap = (used: number, total: number | null) => `${used}/${total ?? '?'}`;
  const sources = cap(h.in_use.sources, h.capacity.sources);
  const listeners = cap(h.in_use.listeners, h.capacity.listeners);
  return `${h.id}  ${state}  sources ${sources}  listeners ${listeners}  heartbeat ${age}  ${h.public_url}`;
}

/** A state change by its host id: the answer printed, exit 1 when nothing could be done (the reason on stderr). */
function stateCommand(name: string, change: (db: Database, id: string) => Promise<HostChange>): Command {
  return async (config, args) => {
    const id = args.find((a) => !a.startsWith('--'));
    if (!id) {
      process.stderr.write(`hosts ${name} needs ID (hosts list shows them)\n`);
      return 2;
    }
    const done = await withDatabase(config, (db) => change(db, id));
    if (!done.ok) {
      process.stderr.write(`${done.reason}\n`);
      return 1;
    }
    process.stdout.write(`host ${id}: ${done.state}\n`);
    return 0;
  };
}

/** The streaming host pool: what each host carries and its state, for the operator. */
export const hostCommands: Record<string, Command> = {
  async 'hosts list'(config, args) {
    const hosts = await withDatabase(config, (db) => hostPoolReport(db, config.streaming.downAfterSeconds));
    if (args.includes('--json')) process.stdout.write(`${JSON.stringify(hosts, null, 2)}\n`);
    else process.stdout.write(`${hosts.length ? hosts.map(hostLine).join('\n') : 'no streaming host registered'}\n`);
    return 0;
  },
  'hosts drain': stateCommand('drain', drainHost),
  'hosts undrain': stateCommand('undrain', undrainHost),
  'hosts remove': stateCommand('remove', removeHost),
};
