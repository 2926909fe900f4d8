import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { allowedOrderTransition, IllegalOrderTransition } from '../src/orders/index.js';
import { orderTransitionSql } from '../src/orders/order-transitions.js';
import {
  allowedTransition,
  IllegalServiceTransition,
  paidUntil,
  recordServiceEvent,
  transitionService,
} from '../src/services/index.js';
import { migrate } from '../src/store/index.js';
import { embeddedDatabase } from './support/database.js';

// One writer per state change: the files allowed to write each kind of change, found by reading every file of src/.
const WRITERS: Array<{ what: string; pattern: RegExp; files: string[] }> = [
  {
    what: "a service's status",
    pattern: /UPDATE services\b[^`'"]*\bSET\s+status\s*=/i,
    files: ['services/service-transitions.ts'],
  },
  { what: 'a service event', pattern: /INSERT INTO service_events/i, files: ['services/service-events.ts'] },
  { what: 'a new service', pattern: /INSERT INTO services\b/i, files: ['services/service-records.ts'] },
  {
    what: "an order's state",
    pattern: /UPDATE orders\b[^`'"]*\bSET\s+state\s*=/i,
    files: ['orders/order-transitions.ts'],
  },
  {
    what: 'any column of an order (its state by the transitions, the rest by its store)',
    pattern: /UPDATE orders\b/i,
    files: ['orders/order-store.ts', 'orders/order-transitions.ts'],
  },
  { what: "a service's reason", pattern: /SET status_reason\s*=/i, files: ['services/service-transitions.ts'] },
  { what: "a service's host", pattern: /SET host_id\s*=/i, files: ['hosts/service-moves.ts'] },
];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'migrations' ? [] : sourceFiles(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

describe('one writer per state change', () => {
  const files = sourceFiles('src').map((path) => ({
    name: path.slice('src/'.length),
    text: readFileSync(path, 'utf8'),
  }));

  for (const writer of WRITERS) {
    test(`only ${writer.files.join(', ')} writes ${writer.what}`, () => {
      const writing = files.filter((f) => writer.pattern.test(f.text)).map((f) => f.name);
      assert.deepEqual(writing.sort(), [...writer.files].sort());
    });
  }
});

describe('the tables of allowed transitions', () => {
  test('an order moves forward only; active and refunded are final', () => {
    assert.ok(allowedOrderTransition('settling', 'active'));
    assert.ok(allowedOrderTransition('failed', 'refunded'));
    for (const [from, to] of [
      ['active', 'refunded'],
      ['refunded', 'active'],
      ['failed', 'active'],
      ['settling', 'refunded'],
      ['provisioning', 'settling'],
    ])
      assert.equal(allowedOrderTransition(from, to), false, `${from} → ${to}`);
    assert.throws(() => orderTransitionSql('active', 'refunded', []), IllegalOrderTransition);
    assert.match(orderTransitionSql('failed', 'refunded', ['failure = $2']), /WHERE id = \$1 AND state = 'failed'/);
  });

  test('a service: a stop ends expired, an extension keeps a suspension, nothing revives a stopped service', async () => {
    assert.ok(allowedTransition('stop', 'active', 'expired'));
    assert.ok(allowedTransition('extension', 'expired', 'active'));
    assert.equal(allowedTransition('extension', 'suspended', 'active'), false);
    assert.equal(allowedTransition('stop', 'expired', 'expired'), false);
    assert.equal(allowedTransition('lifecycle', 'expired', 'active'), false);
    const sent: string[] = [];
    const client = { query: async (sql: string) => (sent.push(sql), { rows: [] }) } as never;
    await assert.rejects(
      transitionService(client, { serviceId: 'svc_x', kind: 'upgrade', from: 'failed', reason: 'no' }),
      IllegalServiceTransition,
    );
    await assert.rejects(
      transitionService(client, { serviceId: 'svc_x', kind: 'stop', from: 'active', to: 'active', reason: 'no' }),
      IllegalServiceTransition,
    );
    assert.deepEqual(sent, [], 'refused before any SQL');
  });

  test('paid-until: decimal hours exact, floored to the millisecond', () => {
    const start = Date.UTC(2026, 0, 1);
    assert.equal(paidUntil(start, 0.1).getTime() - start, 360_000);
    assert.equal(paidUntil(new Date(start), '0.0000001').getTime() - start, 0);
    assert.equal(paidUntil(start, 1 / 3).getTime() - start, 1_200_000 - 1);
    assert.equal(paidUntil(start, 700).getTime() - start, 2_520_000_000);
  });
});

describe('service transitions on PostgreSQL', () => {
  const store = embeddedDatabase('audio-state-changes-');

  test('the status, its reason and its event in one statement; a row no longer in `from` is left alone', async () => {
    await migrate(store.db);
    await store.db.transaction(async (client) => {
      await client.query('SET LOCAL session_replication_role = replica');
      await client.query(
        `INSERT INTO services (id, order_id, api_key_id, product_id, status, mount, source_user, source_password,
                               limits, expires_at)
         VALUES ('svc_1', 'ord_1', 'key_1', 'event-stream', 'active', '/m1', 'source', 'pw', '{}',
                 date_trunc('milliseconds', now()))`,
      );
    });
    const [row] = await store.db.query<{ expires_at: Date }>("SELECT expires_at FROM services WHERE id = 'svc_1'");
    const expire = (expiresAt: Date) =>
      store.db.transaction((client) =>
        transitionService<{ status: string; status_reason: string }>(client, {
          serviceId: 'svc_1',
          kind: 'lifecycle',
          from: 'active',
          to: 'expired',
          reason: 'The paid time ended.',
          unchanged: { expires_at: expiresAt },
        }),
      );
    assert.equal(await expire(new Date(0)), undefined, 'expires_at moved meanwhile: nothing changes');
    const changed = await expire(row.expires_at);
    assert.equal(changed?.status, 'expired');
    assert.equal(changed?.status_reason, 'The paid time ended.');
    assert.equal(await expire(row.expires_at), undefined, 'no longer active');
    await recordServiceEvent(
      store.db,
      { serviceId: 'svc_1', kind: 'enforce', code: 'x', reason: 'r' },
      { oncePerMinute: true },
    );
    await recordServiceEvent(
      store.db,
      { serviceId: 'svc_1', kind: 'enforce', code: 'x', reason: 'r' },
      { oncePerMinute: true },
    );
    const events = await store.db.query(
      "SELECT kind, from_status, to_status, code, reason FROM service_events WHERE service_id = 'svc_1' ORDER BY id",
    );
    assert.deepEqual(events, [
      { kind: 'transition', from_status: 'active', to_status: 'expired', code: null, reason: 'The paid time ended.' },
      { kind: 'enforce', from_status: null, to_status: null, code: 'x', reason: 'r' },
    ]);
  });
});
