import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { canonicalJson, sha256 } from '../src/audit/index.js';
import { request, startService, type Service } from './support/service.js';
import { connectDatabase } from './support/serve-lock.js';

// The audit chain head is the one row every quote and order of every instance locks in turn: a batch of quotes holds
// it only while its records are linked, not while its quotes' own rows are checked and written (migration 018).

let service: Service;
const clients: pg.Client[] = [];

async function connect(): Promise<pg.Client> {
  const client = await connectDatabase(service);
  clients.push(client);
  return client;
}

/** A quote made through the API, its stored row (as jsonb) and audit record, and a connection to their database. */
async function storedQuote(): Promise<{
  db: pg.Client;
  stored: { q: Record<string, unknown>; snapshot_hash: string; record: string };
}> {
  const first = await request(service, 'POST', '/quotes', { body: quoteBody });
  assert.equal(first.status, 200, JSON.stringify(first.body));
  const db = await connect();
  const {
    rows: [stored],
  } = await db.query(
    `SELECT to_jsonb(q) AS q, r.snapshot_hash, r.record FROM quotes q JOIN audit_records r ON r.id = q.evaluation_id WHERE q.id = $1`,
    [first.body.quote.id],
  );
  return { db, stored };
}

before(async () => {
  service = await startService({ RATE_LIMIT_PER_IP: '0', RATE_LIMIT_PER_KEY: '0' });
});
after(async () => {
  await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
  await service?.stop();
});

const quoteBody = {
  product_id: 'instant-stream',
  parameters: { duration_hours: 3, max_listeners: 5, bitrate_kbps: 64 },
};

describe('quote batches and the audit chain head', () => {
  test('a batch waiting to write a quote row does not hold the head: other records are chained meanwhile', async () => {
    const first = await request(service, 'POST', '/quotes', { body: quoteBody });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    const blocker = await connect();
    const batch = await connect();
    const {
      rows: [stored],
    } = await blocker.query(
      `SELECT to_jsonb(q) AS q, to_jsonb(r) AS r FROM quotes q JOIN audit_records r ON r.id = q.evaluation_id WHERE q.id = $1`,
      [first.body.quote.id],
    );
    const record = canonicalJson({ ...JSON.parse(stored.r.record), id: 'ev_waits_for_its_quote_row' });
    const item = {
      ...stored.q,
      id: 'qt_held_by_another_transaction',
      idempotency_key: null,
      evaluation_id: 'ev_waits_for_its_quote_row',
      snapshot_hash: stored.r.snapshot_hash,
      record,
      record_hash: sha256(record),
    };

    // Another transaction holds the same quote id, uncommitted: the batch's INSERT INTO quotes waits for it.
    await blocker.query('BEGIN');
    await blocker.query(`INSERT INTO quotes SELECT (jsonb_populate_record(NULL::quotes, $1::jsonb)).*`, [
      JSON.stringify({ ...stored.q, id: item.id, idempotency_key: null }),
    ]);
    const waiting = batch.query('SELECT * FROM record_quotes($1)', [JSON.stringify([item])]);
    await new Promise((r) => setTimeout(r, 500));

    // Meanwhile the service's own quotes go into the chain without waiting for that batch.
    const meanwhile = await fetch(`${service.baseUrl}/quotes`, {
      method: 'POST',
      body: JSON.stringify(quoteBody),
      signal: AbortSignal.timeout(15_000),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${service.apiKey}` },
    }).then(
      (r) => r.status,
      (e: Error) => e,
    );
    await blocker.query('ROLLBACK');
    const { rows } = await waiting;
    assert.equal(meanwhile, 200, `the chain head was held by a batch waiting on a quote row: ${meanwhile}`);
    assert.equal(rows[0].created, true, 'the batch goes on once the other transaction is gone');
  });

  test('one batch: a repeated Idempotency-Key gets the first quote back, a revoked key records nothing, the others are stored and chained', async () => {
    const { db, stored } = await storedQuote();
    await db.query(
      `INSERT INTO api_keys (id, name, secret_hash, revoked_at) VALUES ('key_revoked_in_batch', 'revoked', 'x', now())`,
    );
    const item = (n: number, extra: Record<string, unknown> = {}) => {
      const record = canonicalJson({ ...JSON.parse(stored.record), id: `ev_batch_${n}` });
      return {
        ...stored.q,
        id: `qt_batch_${n}`,
        idempotency_key: null,
        evaluation_id: `ev_batch_${n}`,
        request_hash: `sha256:request-${n}`,
        response: `{"n":${n}}`,
        snapshot_hash: stored.snapshot_hash,
        record,
        record_hash: sha256(record),
        ...extra,
      };
    };
    const items = [
      item(1, { idempotency_key: 'same-key-in-batch' }),
      item(2),
      item(3, { idempotency_key: 'same-key-in-batch' }),
      item(4, { api_key_id: 'key_revoked_in_batch' }),
      item(5, { idempotency_key: 'other-key-in-batch' }),
    ];
    const {
      rows: [head],
    } = await db.query('SELECT seq FROM audit_head');
    const { rows } = await db.query('SELECT * FROM record_quotes($1) ORDER BY idx', [JSON.stringify(items)]);
    assert.deepEqual(
      rows.map((r) => [r.idx, r.created, r.revoked]),
      [
        [0, true, false],
        [1, true, false],
        [2, false, false],
        [3, false, true],
        [4, true, false],
      ],
    );
    assert.deepEqual(
      [rows[2].id, rows[2].request_hash, rows[2].response],
      ['qt_batch_1', 'sha256:request-1', '{"n":1}'],
      'the repeat gets the first quote of the batch',
    );
    const { rows: quotes } = await db.query(`SELECT id FROM quotes WHERE id LIKE 'qt_batch_%' ORDER BY id`);
    assert.deepEqual(
      quotes.map((q) => q.id),
      ['qt_batch_1', 'qt_batch_2', 'qt_batch_5'],
    );
    const { rows: records } = await db.query('SELECT id, seq FROM audit_records WHERE seq > $1 ORDER BY seq', [
      head.seq,
    ]);
    assert.deepEqual(
      records.map((r) => r.id),
      ['ev_batch_1', 'ev_batch_2', 'ev_batch_5'],
      'the stored quotes are chained in batch order',
    );
    // A later batch repeating the key gets the stored quote back.
    const {
      rows: [again],
    } = await db.query('SELECT * FROM record_quotes($1)', [
      JSON.stringify([item(6, { idempotency_key: 'same-key-in-batch' })]),
    ]);
    assert.deepEqual([again.created, again.id, again.response], [false, 'qt_batch_1', '{"n":1}']);
    const verify = await service.cli(['audit', 'verify']);
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);
  });

  test('records and responses sent as text parameters of their own (migration 027) are stored byte for byte, as in the jsonb-only form', async () => {
    const { db, stored } = await storedQuote();
    const item = (n: number, extra: Record<string, unknown> = {}) => {
      const record = canonicalJson({ ...JSON.parse(stored.record), id: `ev_text_${n}` });
      return {
        ...stored.q,
        id: `qt_text_${n}`,
        idempotency_key: null,
        evaluation_id: `ev_text_${n}`,
        request_hash: `sha256:text-${n}`,
        // Quotes, backslashes and non-ASCII text: what escaping inside JSON or an array literal would have to get right.
        response: `{"n":${n},"s":"a \\"b\\" \\\\ é"}`,
        snapshot_hash: stored.snapshot_hash,
        record,
        record_hash: sha256(record),
        ...extra,
      };
    };
    const items = [item(1, { idempotency_key: 'text-key' }), item(2), item(3, { idempotency_key: 'text-key' })];
    const {
      rows: [head],
    } = await db.query('SELECT seq FROM audit_head');
    const fields = items.map(({ record: _record, response: _response, ...rest }) => rest);
    const { rows } = await db.query(
      'SELECT * FROM record_quotes($1, ARRAY[$2::text, $3::text, $4::text], ARRAY[$5::text, $6::text, $7::text]) ORDER BY idx',
      [JSON.stringify(fields), ...items.map((i) => i.record), ...items.map((i) => i.response)],
    );
    assert.deepEqual(
      rows.map((r) => [r.idx, r.created]),
      [
        [0, true],
        [1, true],
        [2, false],
      ],
    );
    assert.deepEqual(
      [rows[2].id, rows[2].response],
      ['qt_text_1', items[0].response],
      'a repeat within the batch gets the first response, from its parameter',
    );
    const { rows: quotes } = await db.query(`SELECT id, response FROM quotes WHERE id LIKE 'qt_text_%' ORDER BY id`);
    assert.deepEqual(quotes, [
      { id: 'qt_text_1', response: items[0].response },
      { id: 'qt_text_2', response: items[1].response },
    ]);
    const { rows: records } = await db.query(
      'SELECT id, record, record_hash FROM audit_records WHERE seq > $1 ORDER BY seq',
      [head.seq],
    );
    assert.deepEqual(
      records,
      [0, 1].map((i) => ({ id: items[i].evaluation_id, record: items[i].record, record_hash: items[i].record_hash })),
    );
    // The jsonb-only form (023's call) still works: the texts come from the jsonb.
    const {
      rows: [old],
    } = await db.query('SELECT * FROM record_quotes($1)', [JSON.stringify([item(4)])]);
    assert.equal(old.created, true);
    const {
      rows: [oldRecord],
    } = await db.query(
      `SELECT r.record, q.response FROM audit_records r JOIN quotes q ON q.evaluation_id = r.id WHERE r.id = 'ev_text_4'`,
    );
    assert.deepEqual(oldRecord, { record: item(4).record, response: item(4).response });
    const verify = await service.cli(['audit', 'verify']);
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);
  });

  test('records of concurrent batches form one unbroken chain that audit verify and replay accept', async () => {
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        request(service, 'POST', '/quotes', {
          body: quoteBody,
          headers: i % 4 === 0 ? { 'idempotency-key': `chain-hold-${i % 8}` } : {},
        }),
      ),
    );
    for (const a of answers) assert.equal(a.status, 200, JSON.stringify(a.body));
    const db = await connect();
    const {
      rows: [gaps],
    } = await db.query(
      `SELECT count(*)::int AS n FROM audit_records a JOIN audit_records b ON b.seq = a.seq + 1 WHERE b.prev_chain_hash <> a.chain_hash`,
    );
    assert.equal(gaps.n, 0);
    const { rows: orphans } = await db.query(
      'SELECT q.id FROM quotes q LEFT JOIN audit_records r ON r.id = q.evaluation_id WHERE r.id IS NULL',
    );
    assert.deepEqual(orphans, [], 'every quote has its evaluation record');
    const verify = await service.cli(['audit', 'verify']);
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);
    const replay = await service.cli(['audit', 'replay', '--all']);
    assert.equal(replay.code, 0, replay.stdout + replay.stderr);
  });
});
