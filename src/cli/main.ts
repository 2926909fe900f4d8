#!/usr/bin/env node
import { usageError, print, type Command } from './command-line.js';
import { configFromEnv } from './config.js';
import { helpFor, helpRequest, isGroup, usage } from './help.js';
import { spelledApart } from './option-forms.js';

/**
 * The commands by their first word, each group loaded only when it runs: a command starts without the modules of the
 * others (serve's are the whole service; the tests start CLI commands by the hundred).
 */
const commandGroups: Record<string, () => Promise<Record<string, Command>>> = {
  serve: async () => (await import('./serve-command.js')).serveCommands,
  keys: async () => (await import('./keys-commands.js')).keysCommands,
  refunds: async () => (await import('./refunds-commands.js')).refundsCommands,
  audit: async () => (await import('./audit-commands.js')).auditCommands,
  catalog: async () => (await import('./catalog-commands.js')).catalogCommands,
  hosts: async () => (await import('./host-commands.js')).hostCommands,
  facilitator: async () => (await import('./facilitator-command.js')).facilitatorCommands,
  doctor: async () => (await import('./doctor-command.js')).doctorCommands,
  'ownership-proof': async () => (await import('./ownership-proof-command.js')).ownershipProofCommands,
};

/** The first --flag that the command's help does not name (the help is the list of what it takes). */
function unknownOption(name: string, args: string[]): string | undefined {
  const known = new Set(helpFor(name)?.match(/--[a-z][a-z-]*/g) ?? []);
  return args.map((a) => a.split('=')[0]).find((a) => /^--[a-z]/.test(a) && !known.has(a));
}

async function main(argv: string[]): Promise<number> {
  const help = helpRequest(argv);
  if (help !== undefined) {
    print(help);
    return 0;
  }
  if (argv.length === 0) return usageError('agent-audio needs a command');
  if (argv[0] === 'help') return usageError(`unknown command ${argv.slice(1).join(' ')}`);
  if (isGroup(argv[0]) && argv.length === 1) return usageError(`${argv[0]} needs a subcommand`, helpFor(argv[0]));
  const commands = Object.hasOwn(commandGroups, argv[0]) ? await commandGroups[argv[0]]() : {};
  const two = argv.slice(0, 2).join(' ');
  const [name, args] = Object.hasOwn(commands, two) ? [two, argv.slice(2)] : [argv[0], argv.slice(1)];
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!command) return usageError(`unknown command ${isGroup(argv[0]) ? two : argv[0]}`);
  // A command without its own help text (helpRequest did not know it) shows the overview.
  if (args.includes('--help') || args.includes('-h')) {
    print(usage);
    return 0;
  }
  const unknown = unknownOption(name, args);
  if (unknown) return usageError(`unknown option ${unknown} for ${name}`, helpFor(name));
  const spelled = spelledApart(args, helpFor(name) ?? '');
  if ('problem' in spelled) return usageError(spelled.problem, helpFor(name));
  return command(configFromEnv(), spelled.args);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`error: ${(e as Error).message}\n`);
    process.exit(1);
  },
);
