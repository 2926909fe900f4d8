/**
 * How long a quote batch holds the audit chain head (the one row every instance's records lock in turn), measured
 * inside PostgreSQL under the quote load (npx tsx bench/audit-hold.ts [seconds] [connections,...]).
 *
 * On a scratch service it replaces record_quotes by a copy that also writes, per call, when the call started, when
 * it got the head row (SELECT … FOR UPDATE), when its COMMIT ran the last deferred work (foreign key checks) and how
 * many records it chained, into an unlogged table; then it loads POST /quotes with autocannon. Printed: the hold
 * time per batch by batch size, a least-squares fit hold = fixed + per_record × records, and the share of the wall
 * time the row was held. The sample INSERT itself runs inside the held section (a few µs, counted in the hold). The
 * commit record itself is not counted (quotes commit without waiting for the WAL flush).
 */
import autocannon from 'autocannon';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { startService } from '../test/support/service.js';

const seconds = Number(process.argv[2] ?? 8);
const connectionCounts = (process.argv[3] ?? '4,32').split(',').map(Number);
/** For A/B: a migration file whose record_quotes replaces the current one first (e.g. 008_audit_chain.sql). */
const functionFrom = process.argv[4];
const body = JSON.stringify({
  product_id: 'instant-stream',
  parameters: { duration_hours: 3, max_listeners: 5, bitrate_kbps: 64 },
});

const service = await startService({ RATE_LIMIT_PER_IP: '0', RATE_LIMIT_PER_KEY: '0' });
const lock = JSON.parse(await readFile(join(service.dataDir, 'serve.lock'), 'utf8')) as { database_url: string };
const db = new pg.Client({ connectionString: lock.database_url });
try {
  await db.connect();
  // The record_quotes that holds the head (with an older one loaded for A/B, the other is a shim calling it).
  const recordQuotesSignature = async () =>
    (
      await db.query<{ p: string }>(
        "SELECT oid::regprocedure::text AS p FROM pg_proc WHERE proname = 'record_quotes' AND prosrc LIKE '%FROM audit_head FOR UPDATE%'",
      )
    ).rows[0].p;
  // \`released\` is set by a deferred trigger at COMMIT, after the checks deferred before it (they run in queue order).
  await db.query(`CREATE UNLOGGED TABLE audit_hold_samples (id bigserial PRIMARY KEY, started timestamptz, locked timestamptz, released timestamptz, records int);
    CREATE FUNCTION audit_hold_released() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN UPDATE audit_hold_samples SET released = clock_timestamp() WHERE id = NEW.id; RETURN NULL; END $$;
    CREATE CONSTRAINT TRIGGER audit_hold_released AFTER INSERT ON audit_hold_samples DEFERRABLE INITIALLY DEFERRED
      FOR EACH ROW EXECUTE FUNCTION audit_hold_released();`);
  if (functionFrom) {
    const text = await readFile(join(import.meta.dirname, '../src/store/migrations', functionFrom), 'utf8');
    const start = text.search(/CREATE (OR REPLACE )?FUNCTION record_quotes/);
    // 027 changed the arguments: the current record_quotes goes first, and one of before 027 gets a shim taking the
    // service's call (records and responses as text arrays) into its jsonb.
    await db.query(`DROP FUNCTION ${await recordQuotesSignature()}`);
    const older = text.slice(start, text.indexOf('$$;', text.indexOf('$$', text.indexOf('AS $$', start) + 5)) + 3);
    await db.query(older);
    if (!older.includes('p_records')) {
      await db.query(`CREATE FUNCTION record_quotes(p_quotes jsonb, p_records text[], p_responses text[])
        RETURNS TABLE (idx integer, created boolean, revoked boolean, id text, request_hash text, response text) LANGUAGE sql AS $$
        SELECT * FROM record_quotes((SELECT jsonb_agg(e || jsonb_build_object('record', p_records[o], 'response', p_responses[o]) ORDER BY o)
                                     FROM jsonb_array_elements(p_quotes) WITH ORDINALITY AS x(e, o)))
        $$`);
    }
    console.log(`record_quotes as in ${functionFrom}`);
  }
  const {
    rows: [{ def }],
  } = await db.query<{ def: string }>('SELECT pg_get_functiondef($1::regprocedure) AS def', [
    await recordQuotesSignature(),
  ]);
  const lockLine = 'SELECT * INTO head FROM audit_head FOR UPDATE;';
  const headUpdate = def.match(/UPDATE audit_head SET [^;]*;/)?.[0];
  if (!def.includes(lockLine) || !headUpdate) throw new Error('record_quotes changed: adapt bench/audit-hold.ts');
  await db.query(
    def
      .replace(/\bDECLARE\b/, 'DECLARE\n  locked_at timestamptz;')
      .replace(lockLine, `${lockLine}\n  locked_at := clock_timestamp();`)
      .replace(
        headUpdate,
        `${headUpdate}\n  INSERT INTO audit_hold_samples (started, locked, records) VALUES (statement_timestamp(), locked_at, (SELECT a.seq FROM audit_head a) - head.seq);`,
      ),
  );

  for (const connections of connectionCounts) {
    await db.query('TRUNCATE audit_hold_samples');
    const result = await new Promise<autocannon.Result>((resolve, reject) => {
      autocannon(
        {
          url: `${service.baseUrl}/quotes`,
          method: 'POST',
          connections,
          duration: seconds,
          body,
          headers: { 'content-type': 'application/json', authorization: `Bearer ${service.apiKey}` },
        },
        (err, r) => (err ? reject(err) : resolve(r)),
      );
    });
    const { rows } = await db.query<{ records: number; hold_us: number; wait_us: number; started_s: number }>(
      `SELECT records, (extract(epoch FROM released - locked) * 1e6)::float8 AS hold_us, (extract(epoch FROM locked - started) * 1e6)::float8 AS wait_us,
              extract(epoch FROM started)::float8 AS started_s FROM audit_hold_samples WHERE records > 0 ORDER BY started`,
    );
    const wall = rows.length > 1 ? rows[rows.length - 1].started_s - rows[0].started_s : 1;
    const held = rows.reduce((s, r) => s + r.hold_us, 0) / 1e6;
    const records = rows.reduce((s, r) => s + r.records, 0);
    // Least squares over every batch: hold = fixed + per_record × records.
    const n = rows.length;
    const mx = records / n;
    const my = (held * 1e6) / n;
    const sxx = rows.reduce((s, r) => s + (r.records - mx) ** 2, 0);
    const perRecord = sxx > 0 ? rows.reduce((s, r) => s + (r.records - mx) * (r.hold_us - my), 0) / sxx : my / mx;
    const fixed = my - perRecord * mx;
    const median = (xs: number[]) => {
      const s = [...xs].sort((a, b) => a - b);
      return s[Math.floor(s.length / 2)] ?? 0;
    };
    console.log(
      `\n${connections} connections, ${seconds} s: ${Math.round(result.requests.average)} quotes/s (non-2xx answers: ${result.non2xx}); ${records} records in ${n} batches`,
    );
    console.log(
      `head held ${((100 * held) / wall).toFixed(1)} % of the time; median batch ${median(rows.map((r) => r.records))} records, hold median ${median(rows.map((r) => r.hold_us)).toFixed(0)} µs, wait for the row median ${median(rows.map((r) => r.wait_us)).toFixed(0)} µs`,
    );
    console.log(`fit: hold ≈ ${fixed.toFixed(0)} µs + ${perRecord.toFixed(1)} µs × records`);
    console.log('| records in batch | batches | hold median µs | hold per record µs |\n|--:|--:|--:|--:|');
    const bySize = new Map<string, number[]>();
    for (const r of rows) {
      const bucket =
        r.records <= 2
          ? String(r.records)
          : r.records <= 4
            ? '3-4'
            : r.records <= 8
              ? '5-8'
              : r.records <= 16
                ? '9-16'
                : '17+';
      bySize.set(bucket, [...(bySize.get(bucket) ?? []), r.hold_us / 1]);
    }
    for (const bucket of ['1', '2', '3-4', '5-8', '9-16', '17+']) {
      const holds = bySize.get(bucket);
      if (!holds) continue;
      const sizes = rows.filter(
        (r) =>
          (r.records <= 2
            ? String(r.records)
            : r.records <= 4
              ? '3-4'
              : r.records <= 8
                ? '5-8'
                : r.records <= 16
                  ? '9-16'
                  : '17+') === bucket,
      );
      console.log(
        `| ${bucket} | ${holds.length} | ${median(holds).toFixed(0)} | ${median(sizes.map((r) => r.hold_us / r.records)).toFixed(1)} |`,
      );
    }
  }

  // The same section without HTTP around it: record_quotes called directly with batches of known sizes (copies of a
  // stored quote and its record, new ids), one call at a time, so the fit is not blurred by the load's own CPU use.
  const {
    rows: [sample],
  } = await db.query<{ q: Record<string, unknown>; r: { snapshot_hash: string; record: string; record_hash: string } }>(
    `SELECT to_jsonb(q) AS q, to_jsonb(r) AS r FROM quotes q JOIN audit_records r ON r.id = q.evaluation_id LIMIT 1`,
  );
  let next = 0;
  const item = () => {
    next++;
    return {
      ...sample.q,
      id: `qt_hold${next}`,
      idempotency_key: null,
      evaluation_id: `ev_hold${next}`,
      snapshot_hash: sample.r.snapshot_hash,
      record: sample.r.record,
      record_hash: sample.r.record_hash,
    };
  };
  const sizes = [1, 4, 16, 64, 256];
  const direct: Array<{ records: number; hold: number }> = [];
  console.log(
    '\nrecord_quotes called directly, one call at a time:\n| records in batch | calls | hold median µs | hold per record µs |\n|--:|--:|--:|--:|',
  );
  for (const size of sizes) {
    await db.query('TRUNCATE audit_hold_samples');
    const calls = Math.max(10, Math.ceil(1024 / size));
    for (let c = 0; c < calls; c++)
      await db.query('SELECT count(*) FROM record_quotes($1)', [JSON.stringify(Array.from({ length: size }, item))]);
    const { rows } = await db.query<{ hold_us: number }>(
      'SELECT (extract(epoch FROM released - locked) * 1e6)::float8 AS hold_us FROM audit_hold_samples',
    );
    const holds = rows.map((r) => r.hold_us).sort((a, b) => a - b);
    const median = holds[Math.floor(holds.length / 2)];
    direct.push({ records: size, hold: median });
    console.log(`| ${size} | ${holds.length} | ${median.toFixed(0)} | ${(median / size).toFixed(1)} |`);
  }
  const [small, large] = [direct[0], direct[direct.length - 1]];
  const perRecordDirect = (large.hold - small.hold) / (large.records - small.records);
  console.log(
    `fit through the medians of 1 and ${large.records}: hold ≈ ${(small.hold - perRecordDirect).toFixed(0)} µs + ${perRecordDirect.toFixed(1)} µs × records`,
  );
} finally {
  await db.end().catch(() => undefined);
  await service.stop();
}
