import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { EventFeed, recordEvent, type StoredEvent } from '../src/events/index.js';
import type { Logger } from '../src/log/index.js';
import { migrate, type Database } from '../src/store/index.js';
import { embeddedDatabase } from './support/database.js';
import { waitFor } from './support/streaming.js';

const store = embeddedDatabase('audio-feed-');
const quiet: Logger = { info() {}, warn() {}, error() {} };
const IDLE = 'svc_idle_reader';
const BUSY = 'svc_busy_reader';
const READERS = 20;

/** The database, counting the statements made for each service (the first parameter of the feed's queries). */
function counting(db: Database): { db: Database; statements: Map<string, number> } {
  const statements = new Map<string, number>();
  const proxy = new Proxy(db, {
    get(target, property) {
      if (property === 'query') {
        return (sql: string, params: unknown[] = []) => {
          const id = String(params[0]);
          statements.set(id, (statements.get(id) ?? 0) + 1);
          return target.query(sql, params);
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { db: proxy, statements };
}

const record = (serviceId: string) =>
  store.db.transaction((client) =>
    recordEvent(client, { type: 'listeners.threshold', serviceId, apiKeyId: 'key_feed' }),
  );

describe('event feed', () => {
  let feed: EventFeed;
  const stop = new AbortController();
  before(async () => {
    await migrate(store.db);
    await store.db.transaction(async (client) => {
      await client.query('SET LOCAL session_replication_role = replica'); // no orders or keys needed for these rows
      for (const id of [IDLE, BUSY]) {
        await client.query(
          `INSERT INTO services (id, order_id, api_key_id, product_id, status, mount, source_user, source_password, limits)
           VALUES ($1, $1, 'key_feed', 'instant-stream', 'active', '/' || $1, 'source', 'pw', '{}')`,
          [id],
        );
      }
    });
  });
  after(async () => {
    stop.abort();
    await feed?.close();
  });

  test('events of one service wake only its readers: idle readers of another service make no queries', async () => {
    const counted = counting(store.db);
    // A short poll interval: a feed that polls while its LISTEN connection is up shows it at once.
    feed = new EventFeed(counted.db, quiet, 100);
    await feed.start();
    const seen = new Map<string, StoredEvent[]>();
    const follow = (serviceId: string, reader: string) => {
      seen.set(reader, []);
      void (async () => {
        for await (const event of feed.subscribe(serviceId, undefined, stop.signal)) seen.get(reader)!.push(event);
      })();
    };
    for (let i = 0; i < READERS; i++) follow(IDLE, `idle ${i}`);
    follow(BUSY, 'busy');
    const idleStatements = () => counted.statements.get(IDLE) ?? 0;
    // Each idle reader reads once (and asks whether anything is unsettled) when it starts.
    await waitFor('the idle readers to start', () => idleStatements() >= 2 * READERS);
    const before = idleStatements();

    for (let n = 1; n <= 5; n++) {
      await record(BUSY);
      await waitFor(`event ${n} at the busy reader`, () => seen.get('busy')!.length >= n);
    }
    assert.equal(
      idleStatements(),
      before,
      `idle readers made ${idleStatements() - before} queries for another service's events`,
    );
    assert.ok([...seen].every(([reader, events]) => reader === 'busy' || events.length === 0));

    // Their own service's event wakes them all.
    await record(IDLE);
    await waitFor('the idle readers to get their event', () =>
      [...seen].every(([reader, events]) => reader === 'busy' || events.length === 1),
    );
  });
});
