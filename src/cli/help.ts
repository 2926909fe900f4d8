import { catalogHelp } from './catalog-help.js';

/** What every command prints for --help: usage line first, then what it does, its flags and its exit codes. */
export const commandHelp: Record<string, string> = {
  serve: `usage: agent-audio serve [--role api|host|all]

Starts the service: PostgreSQL (embedded in DATA_DIR unless DATABASE_URL is set), migrations, the catalog with hot
reload, HTTP on HOST:PORT, Prometheus metrics; in development also a local chain and Icecast, and DATA_DIR/dev.json
with a working agent API key. Prints "serving on URL" (a host: "streaming on" its Icecast's URL) and a summary when
ready. SIGINT (Ctrl-C) or SIGTERM stops it and its children in order; a second Ctrl-C exits at once (PostgreSQL
still gets a fast shutdown).
  --role all     the API and a streaming host in one process (the default)
  --role api     the HTTP API only: places orders on the pool's live hosts, runs no Icecast
  --role host    a streaming host only: its Icecast, registered in PostgreSQL with a heartbeat; HOST:PORT answers
                 its Icecast's callbacks (keep it on loopback); runs AutoDJ, relays, HLS and the life cycle of the
                 services placed on it (docs/streaming-hosts.md)
  LOG_FORMAT=json|pretty   log lines as JSON (default when stdout is not a terminal) or readable (default on a terminal)
  LOG_LEVEL=debug          also the output of PostgreSQL and the other programs serve runs (default: info)
Configuration: environment variables, see docs/configuration.md.
exit 0: stopped by a signal, 1: could not start (the reason is printed)`,
  facilitator: `usage: agent-audio facilitator

An x402 v2 facilitator made of the official packages (@x402/core's facilitator, @x402/evm's exact scheme) behind
HTTP: POST /verify, POST /settle, GET /supported, on HOST:PORT. It settles EIP-3009 payments on X402_NETWORK with
its own key, which pays the gas. Services reach it through X402_FACILITATOR_URL. Prints "facilitator on URL".
  FACILITATOR_RPC_URL    the chain's RPC endpoint (it sends transactions)
  FACILITATOR_KEY_FILE   a file holding the gas wallet's 0x private key
  X402_NETWORK           the network it settles on (eip155:8453)
  FACILITATOR_FAULT      tests only, refused in production: pending-200:MS, pending-500:MS, pending-circle:MS,
                         pending-202:MS, slow-settle:MS, settle-hang, settle-refused, wrong-transaction[:0xHASH],
                         unsupported-network, down:MS
exit 0: stopped by a signal, 1: could not start, 2: a setting is missing`,
  doctor: `usage: agent-audio doctor [--json]

Checks the production configuration before a single sale, one line per check (ok, warn or FAIL with what to do):
each facilitator of X402_FACILITATOR_URL lists exact on X402_NETWORK; X402_RPC_URL's chain id is that network's;
the token at X402_ASSET answers name() and version() with the EIP-712 domain the 402 advertises; X402_PAY_TO is an
address and not the refund wallet; the refund wallet's ETH and USDC (in typical refunds); PUBLIC_BASE_URL reaches
this API; PostgreSQL's version (15 or later) and migrations; the catalog; the webhook secrets key; the streaming
hosts and their heartbeats. Changes nothing (applies no migration). serve runs the same checks at its start in
production and refuses to start on what would lose money (payTo, chain id, the token's domain).
  --json   the checks as JSON: {status, checks: [{check, status, message, fix, refuse}]}
exit 0: all ok, 1: a check failed, 3: warnings only`,
  'ownership-proof': `usage: agent-audio ownership-proof --key-file FILE [--origin URL]

Signs the site's origin with X402_PAY_TO's private key (EIP-191): the ownership proof x402scan and agentcash read in
/.well-known/x402 and OpenAPI x-discovery. Run it where the key is kept; the service never needs the key, only the
proof, in X402_OWNERSHIP_PROOFS. Prints JSON {origin, address, proof, setting}.
  --key-file FILE   a file holding payTo's 0x private key
  --origin URL      the origin agents reach the site at (default: PUBLIC_BASE_URL's)
exit 0: signed, 1: the key is not X402_PAY_TO's, 2: a flag is missing or the key file is unusable`,
  'keys create': `usage: agent-audio keys create --name NAME

Creates an agent API key and prints it once as JSON {id, name, api_key}; only its hash is stored.
  --name NAME   what the key is for (shown in keys list)
exit 0: created, 2: no --name`,
  'keys list': `usage: agent-audio keys list

Lists the agent API keys as JSON: id, name, created and revoked times (never the keys themselves).
exit 0`,
  'keys revoke': `usage: agent-audio keys revoke ID

Revokes the key with this id at once: every request with it gets 401 from then on, a replayed order included.
exit 0: revoked, 1: no active key with this id, 2: no ID`,
  'audit list': `usage: agent-audio audit list [--limit N] [--kind K] [--product P] [--key API_KEY_ID] [--since T] [--until T]

The latest audit records (price evaluations and order states), newest first, as JSON.
  --limit N        at most N records (default 20)
  --kind K         only records of this kind (quote_price, order_price, upgrade_price, extension_price,
                   order_state, refund_evaluation, refund_sent)
  --product P      only evaluations of this product
  --key ID         only records made for this API key id
  --since T, --until T   a time window (2026-11-23 or 2026-11-23T15:00:00Z)
exit 0, 2: a bad date`,
  'audit show': `usage: agent-audio audit show ID

An evaluation record, or everything that priced a quote, order or service, with the orders' chained states, as JSON.
exit 0: found, 1: no such record, quote, order or service`,
  'audit replay': `usage: agent-audio audit replay ID | --all [--progress]

Re-evaluates records (quotes, orders, upgrades, extensions) on the catalog snapshot they ran on and compares field by field.
Prints one JSON report per record, then a count.
  --all        every evaluation record in the chain
  --progress   "replayed N/M" lines on stderr (the default when stderr is a terminal); stdout is unchanged
exit 0: all identical, 1: a difference, 2: neither ID nor --all`,
  'audit verify': `usage: agent-audio audit verify [--head FILE]... [--public-key FILE]

Checks every link of the audit chain over every stored field, every order against its chained states, and that the
chain passes through each signed head given.
  --head FILE         a signed head kept earlier (GET /api/v1/audit/head or audit head); repeatable
  --public-key FILE   the operator's public key (PEM); default: that of the signing key configured here
exit 0: intact, 1: a problem (each printed on stderr)`,
  'audit head': `usage: agent-audio audit head

Signs the current chain head with the operator key and prints it as JSON. Keep it: a later rewrite before it shows
in audit verify --head.
exit 0, 1: no signing key configured`,
  'audit export': `usage: agent-audio audit export --order ID | --quote ID | --since T [--until T] [--out FILE]

One self-contained evidence file: the records, their catalog snapshots, the chain path to a signed head, the
settlements with their on-chain proof, and the orders' refunds with their transactions and receipts. Checked offline
with audit verify-bundle.
  --order ID, --quote ID   what one order or quote rests on
  --since T, --until T     every record in a time window
  --out FILE               write the file there (default: stdout)
exit 0, 2: nothing selected or a bad date`,
  'audit verify-bundle': `usage: agent-audio audit verify-bundle FILE [--public-key FILE]

Checks an exported file with no database and no network: replays every evaluation, the chain links and the
signatures. Prints VERIFIED or each difference.
  --public-key FILE   the operator's public key (PEM) to trust; default: the key named in the file
exit 0: verified, 1: not verified, 2: no FILE`,
  'refunds list': `usage: agent-audio refunds list [--limit N]

The latest refunds, newest first, as JSON: status (pending, sent, none, failed), amount, recipient (the payer proven by
the payment), whether it waits for an operator (over REFUND_MAX_PER_DAY_ATOMIC), why it is not sent yet, transaction.
  --limit N   at most N refunds (default 100)
exit 0`,
  'refunds approve': `usage: agent-audio refunds approve ID

Lets a refund that waits for an operator (it took the day's refunds over REFUND_MAX_PER_DAY_ATOMIC) be sent: the refund
worker of a running serve sends it on its next pass, proven on chain like any refund.
exit 0: approved, 1: no refund with this id waiting for approval, 2: no ID`,
  'hosts list': `usage: agent-audio hosts list [--json]

The streaming hosts of the pool: id, state (up, draining, down), capacity (stream slots, listener places, bandwidth),
what is in use on each, and how old its heartbeat is (a host older than HOST_DOWN_AFTER_SECONDS gets no placements).
  --json   as JSON
exit 0`,
  'hosts drain': `usage: agent-audio hosts drain ID

No new service is placed on this host; the services on it run to their end (and may be upgraded or extended there).
exit 0: draining, 1: no such host or it is down, 2: no ID`,
  'hosts undrain': `usage: agent-audio hosts undrain ID

A drained host takes new services again.
exit 0: up, 1: no such host or it is down, 2: no ID`,
  'hosts remove': `usage: agent-audio hosts remove ID

Forgets a host that holds no live service and no paid order in flight (drain it first and wait for them to end).
exit 0: removed, 1: no such host or it still holds services, 2: no ID`,
  ...catalogHelp,
};

const groups: Record<string, string> = {
  catalog: 'validate, compare and preview the catalog and rules on disk',
  keys: 'agent API keys',
  audit: 'the audit chain: list, show, replay, verify, sign, export',
  refunds: 'refunds of stopped services and undelivered orders: list, approve over the daily cap',
  hosts: 'the pool of streaming hosts: list, drain, undrain, remove',
};

/** The first line of each command's help without "usage: agent-audio ", for the overview. */
function synopsis(name: string): string {
  return commandHelp[name].split('\n')[0].replace(/^usage: agent-audio /, '');
}

function listing(names: string[]): string {
  return names.map((name) => `  ${synopsis(name)}`).join('\n');
}

const members = (group: string) => Object.keys(commandHelp).filter((c) => c.startsWith(`${group} `));

/** What each command outside a group is for, beside its synopsis in the overview. */
const standalone: Record<string, string> = {
  serve: 'start the service',
  doctor: 'check the production configuration before selling',
  facilitator: 'an x402 facilitator that settles with its own gas wallet',
  'ownership-proof': "sign the site's origin with payTo's key (discovery)",
};

const standaloneListing = Object.entries(standalone)
  .map(([name, about]) => `  ${synopsis(name).padEnd(48)} ${about}`)
  .join('\n');

export const usage = `usage: agent-audio <command> [flags]     (agent-audio <command> --help, or agent-audio help <command>: one command)

${standaloneListing}
${Object.entries(groups)
  .map(([group, about]) => `\n${group}: ${about}\n${listing(members(group))}`)
  .join('\n')}

environment: DATA_DIR (./data), HOST (127.0.0.1), PORT (8080), PUBLIC_BASE_URL, METRICS_HOST, METRICS_PORT, DATABASE_URL,
CATALOG_DIR (./catalog), RULES_DIR (./rules), LOG_FORMAT (json|pretty), LOG_LEVEL (info); more in docs/configuration.md`;

/** The help of a command ("keys create") or of a group ("keys"); undefined when there is no such thing. */
export function helpFor(name: string): string | undefined {
  if (Object.hasOwn(commandHelp, name)) return commandHelp[name];
  if (!isGroup(name)) return undefined;
  return (
    `usage: agent-audio ${name} <subcommand> [flags]     (${groups[name]}; each has ` +
    `--help)\n\n${listing(members(name))}`
  );
}

export const isGroup = (name: string): boolean => Object.hasOwn(groups, name);

const helpFlags = ['--help', '-h'];

/**
 * The help text when these arguments ask for the help of a command or group documented here (or the overview);
 * undefined otherwise, including for usage errors, which the command line itself reports.
 */
export function helpRequest(argv: string[]): string | undefined {
  if (argv[0] === 'help' || helpFlags.includes(argv[0])) {
    const topic = argv
      .slice(1)
      .filter((a) => !helpFlags.includes(a))
      .join(' ');
    return topic ? helpFor(topic) : usage;
  }
  if (!argv.some((a) => helpFlags.includes(a))) return undefined;
  // "keys frob --help" is not help for keys: the command line reports the unknown command.
  return (
    helpFor(argv.slice(0, 2).join(' ')) ??
    (isGroup(argv[0]) && !helpFlags.includes(argv[1]) ? undefined : helpFor(argv[0]))
  );
}
