import type { Logger } from '../log/index.js';
import type { ListenerFacts } from '../stats/index.js';
import type { Client, Database } from '../store/index.js';
import { clientNetwork, type NewListenerSession } from './listener-sessions.js';
import { recordCapRefusal } from './listener-admission.js';
import { factsKey, SessionFactsCache } from './session-facts-cache.js';

/** A change to the listeners table (and its sessions) that memory has already made. */
export type PlaceChange =
  | {
      kind: 'add';
      serviceId: string;
      clientId: string;
      ip: string;
      at: number;
      session: Pick<NewListenerSession, 'userAgent' | 'protocol'>;
    }
  | { kind: 'remove'; serviceId: string; clientIds: string[] }
  | { kind: 'remove-icecast'; serviceId: string }
  | { kind: 'refused'; serviceId: string; cap: number };

const MAX_AGENT = 400;
const RETRY_MS = 500;
/**
 * How long a change waits for others to share its transaction: a burst of admissions is written in a few batches
 * rather than one transaction per answer, whose round trips would cost serve more than the answers.
 */
const GATHER_MS = 20;
/** A batch this large is written at once. */
const BATCH_CHANGES = 500;

/**
 * Writes the listener places that memory granted and released, in order and in batches, behind the answers: Icecast
 * waits for no database write. The rows are the owner's statistics and the other instances' view; a crash loses at
 * most the last batch, which the life-cycle worker's reconciliation with Icecast's listclients repairs. A change waits
 * up to GATHER_MS for others to share its transaction.
 */
export class PlaceWriter {
  private queue: PlaceChange[] = [];
  private running?: Promise<void>;
  private retry?: NodeJS.Timeout;
  private gathering?: NodeJS.Timeout;
  private stopped = false;
  private readonly facts = new SessionFactsCache();

  constructor(
    private readonly db: Database,
    private readonly log: Logger,
  ) {}

  /** After stop() a change is dropped: its pool may be closed; the next start's reconciliation repairs the rows. */
  push(change: PlaceChange): void {
    if (this.stopped) return;
    this.queue.push(change);
    if (this.retry || this.running) return;
    if (this.queue.length >= BATCH_CHANGES) this.startDrain();
    else this.gathering ??= setTimeout(() => this.startDrain(), GATHER_MS);
  }

  /** Resolves once every change pushed so far is committed (or, on a database error, has been tried). */
  async flush(): Promise<void> {
    while (this.running || this.queue.length) {
      this.startDrain();
      await this.running;
      if (this.retry) return;
    }
  }

  /**
   * Starts writing what is queued, unless it is being written. `running` is cleared once that write has ended, never
   * before it is set: a drain that found nothing to write (its retry came after a flush had written the batch) ends
   * at once, and clearing it from inside would leave an ended promise in `running` that flush() awaits for ever.
   */
  private startDrain(): void {
    clearTimeout(this.gathering);
    this.gathering = undefined;
    if (this.running || !this.queue.length) return;
    const running = this.drain().finally(() => {
      if (this.running === running) this.running = undefined;
    });
    this.running = running;
  }

  stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.gathering);
    this.gathering = undefined;
    clearTimeout(this.retry);
    this.retry = undefined;
    return this.flush();
  }

  private async drain(): Promise<void> {
    while (this.queue.length) {
      const batch = this.queue;
      this.queue = [];
      try {
        const facts = await this.facts.of(
          batch.flatMap((c) => (c.kind === 'add' ? [{ ip: c.ip, userAgent: c.session.userAgent }] : [])),
        );
        await this.db.transaction((client) => writeChanges(client, batch, facts), LOOSE_COMMIT);
      } catch (err) {
        this.queue = [...batch, ...this.queue];
        this.log.warn({ err, changes: batch.length }, 'listener places: could not write; retrying');
        clearTimeout(this.retry);
        this.retry = setTimeout(() => {
          this.retry = undefined;
          this.startDrain();
        }, RETRY_MS);
        this.retry.unref();
        return;
      }
    }
  }
}

// Listener rows are state Icecast also holds: a crash that loses the last commit is repaired by reconciliation.
// Sent with the BEGIN, in its round trip.
const LOOSE_COMMIT = { sql: 'SET LOCAL synchronous_commit = off', params: [] };

type Add = Extract<PlaceChange, { kind: 'add' }>;

/** Consecutive changes of one kind go in one statement; the order between kinds is kept. */
async function writeChanges(client: Client, changes: PlaceChange[], facts: Map<string, ListenerFacts>): Promise<void> {
  for (let i = 0; i < changes.length; ) {
    const kind = changes[i].kind;
    let j = i;
    while (j < changes.length && changes[j].kind === kind) j++;
    await writeRun(client, changes.slice(i, j), facts);
    i = j;
  }
}

async function writeRun(client: Client, run: PlaceChange[], facts: Map<string, ListenerFacts>): Promise<void> {
  const adds = run.filter((c) => c.kind === 'add');
  if (adds.length) return addPlaces(client, adds, facts);
  for (const change of run) {
    if (change.kind === 'remove')
      await client.query('DELETE FROM listeners WHERE service_id = $1 AND client_id = ANY($2::text[])', [
        change.serviceId,
        change.clientIds,
      ]);
    if (change.kind === 'remove-icecast')
      await client.query("DELETE FROM listeners WHERE service_id = $1 AND client_id NOT LIKE 'hls:%'", [
        change.serviceId,
      ]);
    if (change.kind === 'refused') await recordCapRefusal(client, change.serviceId, change.cap);
  }
}

/** Text JSON can carry into PostgreSQL's text (which holds no NUL). */
const plain = (s: string) => s.replaceAll('\u0000', '');

/**
 * The places and their sessions in one statement, the batch as one JSON parameter: one round trip whatever the batch's
 * size, and no array parameters for pg to escape element by element.
 */
async function addPlaces(client: Client, adds: Add[], facts: Map<string, ListenerFacts>): Promise<void> {
  const rows = adds.map((c) => {
    const { country, device_class, platform } = facts.get(factsKey(c.ip, c.session.userAgent)) as ListenerFacts;
    return {
      service_id: c.serviceId,
      client_id: plain(c.clientId),
      protocol: c.session.protocol,
      client_network: clientNetwork(c.ip),
      user_agent: plain(c.session.userAgent.slice(0, MAX_AGENT)),
      started_at: new Date(c.at).toISOString(),
      country,
      device_class,
      platform,
    };
  });
  await client.query(
    `WITH u AS (
       SELECT * FROM json_to_recordset($1::json)
         AS u (service_id text, client_id text, protocol text, client_network text, user_agent text,
               started_at timestamptz, country text, device_class text, platform text)
     ), places AS (
       INSERT INTO listeners (service_id, client_id, ip, connected_at)
       SELECT service_id, client_id, client_network, started_at FROM u ON CONFLICT DO NOTHING
     )
     INSERT INTO listener_sessions
       (service_id, client_id, protocol, client_network, user_agent, started_at, country, device_class, platform)
     SELECT u.* FROM u
     WHERE NOT EXISTS (SELECT 1 FROM listener_sessions ls
                       WHERE ls.service_id = u.service_id AND ls.client_id = u.client_id AND ls.ended_at IS NULL)`,
    [JSON.stringify(rows)],
  );
}
