import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { auditCommand } from './support/audit-command.js';
import { buy, payFor } from './support/purchase.js';
import { cli, request, scratchDir, startService, type Service } from './support/service.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';
import { requireStreamingTools } from './support/system-tools.js';
import { devFile, type DevFile } from './support/dev-file.js';
import { connectDatabase } from './support/serve-lock.js';

requireStreamingTools();

let service: Service;
let wallet: TestWallet;
let dev: DevFile;
let db: pg.Client;

before(async () => {
  service = await startService();
  dev = await devFile(service);
  wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  db = await connectDatabase(service);
});
after(async () => {
  await db?.end();
  await service?.stop();
});

const stream = async (parameters: Record<string, unknown>) => {
  const r = await buy(service, wallet, {
    product_id: 'instant-stream',
    email: 'audit@example.com',
    station_name: 'Audit FM',
    parameters,
  });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body as { order: any; service: { service_id: string } };
};
const upgrade = (serviceId: string, productId = 'event-stream') =>
  payFor(service, wallet, `/services/${serviceId}/upgrade`, { product_id: productId });
/**
 * audit verify in this process (support/audit-command.ts): the file verifies the chain a dozen times over; its first
 * run is a CLI process as an operator runs it, as are the other audit commands.
 */
const verify = (...args: string[]) => auditCommand(['audit', 'verify', ...args], service.env);
const verifyCli = () => service.cli(['audit', 'verify']);
const json = (text: string) => JSON.parse(text);

describe('the audit trail', () => {
  let upgraded: { order: any; serviceId: string; evaluationId: string };
  let streamOrderId: string;

  test('an upgrade is recorded with its target price, credit, minimum and charge, and every record replays byte for byte', async () => {
    const bought = await stream({ duration_hours: 24, max_listeners: 5, bitrate_kbps: 64, transfer_gb: 2 });
    assert.match(bought.order.evaluation_id, /^ev_/, 'an order points to the evaluation that priced it');
    const id = bought.service.service_id;
    const r = await upgrade(id);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const order = r.body.order;
    assert.match(order.evaluation_id, /^ev_/);
    assert.equal(order.upgrade_of, id);
    upgraded = { order, serviceId: id, evaluationId: order.evaluation_id };

    const replay = await service.cli(['audit', 'replay', '--all']);
    assert.equal(replay.code, 0, replay.stdout);
    assert.match(replay.stdout, /(\d+) replayed, \1 identical, 0 different/);

    const record = json((await service.cli(['audit', 'show', order.evaluation_id])).stdout).record;
    assert.equal(record.kind, 'upgrade_price');
    assert.equal(record.amount_atomic, order.amount.amount_atomic, 'the record says what was charged');
    assert.deepEqual(
      record.input.paid,
      [{ order_id: bought.order.id, amount_atomic: bought.order.amount.amount_atomic, hours: 24 }],
      'what was paid for the service so far',
    );
    assert.equal(record.input.from_product_id, 'instant-stream');
    assert.equal(record.target.output.product_id, 'event-stream');
    assert.ok(record.current, 'the credit comes from an evaluation of the current product');
    const unused =
      (BigInt(bought.order.amount.amount_atomic) * BigInt(Math.round(record.input.remaining_hours * 100))) / 2400n;
    assert.ok(BigInt(record.credit_atomic) <= unused, 'the credit is at most the unused share of what was paid');
    assert.equal(
      BigInt(record.amount_atomic),
      [BigInt(record.target.output.total_atomic) - BigInt(record.credit_atomic), BigInt(record.minimum_atomic)].reduce(
        (a, b) => (a > b ? a : b),
      ),
    );

    const svc = await request(service, 'GET', `/services/${id}`);
    assert.equal(
      svc.body.evaluation_id,
      order.evaluation_id,
      'the service shows the evaluation that priced its current form',
    );
    assert.deepEqual(
      svc.body.evaluations.map((e: any) => e.evaluation_id),
      [bought.order.evaluation_id, order.evaluation_id],
    );
    assert.equal((await request(service, 'GET', `/orders/${order.id}`)).body.order.evaluation_id, order.evaluation_id);

    const byService = json((await service.cli(['audit', 'show', id])).stdout);
    // A new stream is settled and provisioned in one statement: one chained state for both, with its settlement.
    const streamStates = byService.records.filter(
      (x: any) => x.kind === 'order_state' && x.subject === bought.order.id,
    );
    assert.deepEqual(
      streamStates.map((x: any) => x.record.state),
      ['settling', 'active'],
    );
    assert.match(streamStates[1].record.settlement.transaction, /^0x[0-9a-f]{64}$/);
    assert.ok(streamStates[1].record.settled_at, 'the settlement time is chained with it');
    streamOrderId = bought.order.id;
    assert.deepEqual(
      new Set(byService.records.map((x: any) => x.kind)),
      new Set(['order_price', 'upgrade_price', 'order_state']),
    );
    const states = byService.records
      .filter((x: any) => x.kind === 'order_state' && x.subject === order.id)
      .map((x: any) => x.record.state);
    assert.deepEqual(states, ['settling', 'provisioning', 'active'], 'claim, settlement and provisioning are chained');
    const settled = byService.records.find(
      (x: any) => x.kind === 'order_state' && x.subject === order.id && x.record.state === 'provisioning',
    );
    assert.match(settled.record.settlement.transaction, /^0x[0-9a-f]{64}$/);

    const listed = json(
      (
        await service.cli([
          'audit',
          'list',
          '--kind',
          'upgrade_price',
          '--product',
          'event-stream',
          '--since',
          '2000-01-01',
        ])
      ).stdout,
    );
    assert.ok(listed.some((x: any) => x.id === order.evaluation_id));
    const keyId = (await db.query('SELECT api_key_id FROM orders WHERE id = $1', [order.id])).rows[0].api_key_id;
    assert.ok(
      json((await service.cli(['audit', 'list', '--key', keyId, '--kind', 'order_state'])).stdout).some(
        (x: any) => x.subject === order.id,
      ),
    );
    assert.deepEqual(json((await service.cli(['audit', 'list', '--key', 'key_nobody'])).stdout), []);
    assert.deepEqual(json((await service.cli(['audit', 'list', '--until', '2000-01-01'])).stdout), []);
  });

  test('an upgrade that changes nothing is refused before any payment', async () => {
    const ask = await request(service, 'POST', `/services/${upgraded.serviceId}/upgrade`, {
      body: { product_id: 'event-stream' },
      headers: { 'idempotency-key': `noop-${Date.now()}` },
    });
    assert.equal(ask.status, 409, JSON.stringify(ask.body));
    assert.equal(ask.body.error.code, 'upgrade_changes_nothing');
    assert.match(ask.body.error.message, /would change nothing/);
  });

  test('parallel upgrades of one service: one is charged, the others are refused without charge', async () => {
    const bought = await stream({ duration_hours: 2, max_listeners: 2, bitrate_kbps: 64 });
    const ask = await request(service, 'POST', `/services/${bought.service.service_id}/upgrade`, {
      body: { product_id: 'event-stream' },
      headers: { 'idempotency-key': `ask-${Date.now()}` },
    });
    const { asset } = decodePaymentRequiredHeader(ask.headers.get('payment-required')!).accepts[0];
    const before = await wallet.balanceOf(asset, dev.buyer.address);
    const answers = await Promise.all([1, 2, 3].map(() => upgrade(bought.service.service_id)));
    const paid = answers.filter((a) => a.status === 200);
    assert.equal(paid.length, 1, JSON.stringify(answers.map((a) => [a.status, a.body.error?.code])));
    for (const a of answers.filter((x) => x.status !== 200)) {
      assert.equal(a.status, 409, JSON.stringify(a.body));
      assert.ok(
        ['upgrade_in_progress', 'service_changed', 'upgrade_changes_nothing'].includes(a.body.error.code),
        a.body.error.code,
      );
    }
    const spent = before - (await wallet.balanceOf(asset, dev.buyer.address));
    assert.equal(spent, BigInt(paid[0].body.order.amount.amount_atomic), 'exactly one upgrade was charged on chain');
  });

  test('export and verify-bundle: a self-contained file verifies offline; a tampered one shows the differing field', async () => {
    const dir = await scratchDir('audit-bundle-');
    const file = join(dir, 'order.json');
    const exported = await service.cli(['audit', 'export', '--order', upgraded.order.id, '--out', file]);
    assert.equal(exported.code, 0, exported.stderr);
    const bundle = json(await readFile(file, 'utf8'));
    assert.ok(bundle.records.some((r: any) => r.id === upgraded.evaluationId));
    assert.ok(Object.keys(bundle.snapshots).length >= 1);
    assert.match(bundle.settlements[upgraded.order.id].transaction, /^0x/);

    const head = await request(service, 'GET', '/audit/head', { auth: false });
    assert.equal(head.status, 200);
    const keyFile = join(dir, 'operator.pem');
    await writeFile(keyFile, head.body.public_key);
    assert.equal(bundle.signed_head.head.key_id, head.body.key_id);
    const health = await request(service, 'GET', '/health', { auth: false });
    assert.equal(health.body.audit.key_id, head.body.key_id, '/health publishes the operator key');
    const privateKey = await readFile(join(service.dataDir, 'audit-signing-key.pem'), 'utf8');
    assert.ok(!service.output().includes(privateKey.split('\n')[1]), 'the private key is never logged');

    // Offline: no DATABASE_URL, an empty DATA_DIR, nothing running there.
    const offline = { DATA_DIR: await scratchDir('audit-offline-'), DATABASE_URL: '' };
    const ok = await cli(['audit', 'verify-bundle', file, '--public-key', keyFile], offline);
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    assert.match(ok.stdout, /VERIFIED/);
    assert.match(ok.stdout, /evaluations replayed byte for byte/);

    const record = bundle.records.find((r: any) => r.id === upgraded.evaluationId);
    const text = json(record.record);
    text.amount_atomic = '1';
    record.record = JSON.stringify(text);
    const tamperedFile = join(dir, 'tampered.json');
    await writeFile(tamperedFile, JSON.stringify(bundle));
    const bad = await cli(['audit', 'verify-bundle', tamperedFile, '--public-key', keyFile], offline);
    assert.equal(bad.code, 1, bad.stdout);
    assert.match(bad.stdout, /NOT VERIFIED/);
    assert.match(bad.stderr, /\$\.amount_atomic recorded "1", replayed "\d+"/);
    assert.match(bad.stderr, /record_hash: the record was edited/);
  });

  test("an order at a quote's locked price: exported with the quote's evaluation, and verify checks the price", async () => {
    const parameters = { duration_hours: 1.5, max_listeners: 2, bitrate_kbps: 64 };
    const quoted = await request(service, 'POST', '/quotes', { body: { product_id: 'instant-stream', parameters } });
    assert.equal(quoted.status, 200);
    const r = await buy(service, wallet, {
      product_id: 'instant-stream',
      billing: 'quote',
      email: 'audit@example.com',
      station_name: 'Audit FM',
      parameters,
      metadata: { quote_id: quoted.body.quote.id },
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.order.amount.amount_atomic, quoted.body.quote.price.amount_atomic);
    const bundle = json((await service.cli(['audit', 'export', '--order', r.body.order.id])).stdout);
    assert.ok(
      bundle.records.some((x: any) => x.id === quoted.body.quote.audit.evaluation_id),
      'the quote that locked the price is in the bundle',
    );
    const result = await verifyCli();
    assert.equal(result.code, 0, result.stderr);

    await db.query('SET session_replication_role = replica');
    try {
      await db.query('UPDATE quotes SET amount_atomic = 1 WHERE id = $1', [quoted.body.quote.id]);
      await db.query('UPDATE orders SET amount_atomic = 1 WHERE id = $1', [r.body.order.id]);
      const edited = await verify();
      assert.equal(edited.code, 1);
      assert.match(
        edited.stderr,
        new RegExp(`order ${r.body.order.id}: charged 1 atomic units at quote price, but the quote's evaluation`),
      );
    } finally {
      await db.query('UPDATE quotes SET amount_atomic = $2 WHERE id = $1', [
        quoted.body.quote.id,
        quoted.body.quote.price.amount_atomic,
      ]);
      await db.query('UPDATE orders SET amount_atomic = $2 WHERE id = $1', [
        r.body.order.id,
        r.body.order.amount.amount_atomic,
      ]);
      await db.query('SET session_replication_role = origin');
    }
  });

  test("GET /audit/head tells nobody the record count; the auditor's copy still checks the chain", async () => {
    const quoted = await request(service, 'POST', '/quotes', {
      body: { product_id: 'instant-stream', parameters: { duration_hours: 2, max_listeners: 2, bitrate_kbps: 64 } },
    });
    const quotedSeq = (
      await db.query('SELECT seq::text FROM audit_records WHERE id = $1', [quoted.body.quote.audit.evaluation_id])
    ).rows[0].seq;
    const answer = await waitForHead(
      async (h) => BigInt(await seqOfLink(h.signed_head.head.chain_hash)) >= BigInt(quotedSeq),
    );
    for (const document of [answer, (await request(service, 'GET', '/audit/head')).body]) {
      assert.doesNotMatch(JSON.stringify(document), /"seq"/, 'no record count, with or without an API key');
      assert.deepEqual(Object.keys(document.signed_head.head).sort(), ['chain_hash', 'key_id', 'signed_at', 'type']);
    }
    assert.equal(answer.signed_head.head.type, 'agent-audio.audit-checkpoint/1');
    const dir = await scratchDir('audit-head-');
    const keyFile = join(dir, 'operator.pem');
    await writeFile(keyFile, answer.public_key);
    const whole = join(dir, 'answer.json');
    await writeFile(whole, JSON.stringify(answer));
    const kept = await verify('--head', whole, '--public-key', keyFile);
    assert.equal(kept.code, 0, kept.stdout + kept.stderr);
    assert.match(kept.stdout, /intact and passes through the 1 signed heads given/);
    // A checkpoint of a link the chain does not have is reported, not ignored.
    const elsewhere = {
      ...answer.signed_head,
      head: { ...answer.signed_head.head, chain_hash: 'sha256:' + '2'.repeat(64) },
    };
    const stranger = join(dir, 'stranger.json');
    await writeFile(stranger, JSON.stringify(elsewhere));
    assert.match((await verify('--head', stranger)).stderr, /signature does not verify/);
  });

  test('verify notices an edited kind, created_at or order amount', async () => {
    const intact = await verify();
    assert.equal(intact.code, 0, intact.stderr);
    const [quoteRecord] = (
      await db.query("SELECT id, kind FROM audit_records WHERE kind = 'order_price' ORDER BY seq LIMIT 1")
    ).rows;

    await db.query("UPDATE audit_records SET kind = 'quote_price' WHERE id = $1", [quoteRecord.id]);
    let result = await verify();
    assert.equal(result.code, 1);
    assert.match(result.stderr, new RegExp(`${quoteRecord.id}.*a stored field was edited`));
    await db.query('UPDATE audit_records SET kind = $2 WHERE id = $1', [quoteRecord.id, quoteRecord.kind]);

    await db.query("UPDATE audit_records SET created_at = created_at - interval '1 day' WHERE id = $1", [
      quoteRecord.id,
    ]);
    result = await verify();
    assert.equal(result.code, 1);
    assert.match(result.stderr, /a stored field was edited/);
    await db.query("UPDATE audit_records SET created_at = created_at + interval '1 day' WHERE id = $1", [
      quoteRecord.id,
    ]);
    assert.equal((await verify()).code, 0, 'restored');

    // The catalog a record ran on, edited: nothing is replayed on it.
    const {
      rows: [snapshot],
    } = await db.query(
      'SELECT hash, files FROM snapshots WHERE hash = (SELECT snapshot_hash FROM audit_records WHERE id = $1)',
      [quoteRecord.id],
    );
    const edited = Object.fromEntries(
      Object.entries(snapshot.files as Record<string, string>).map(([k, v]) => [
        k,
        k.endsWith('instant-stream.yaml') ? v.replace('base_atomic: "250000"', 'base_atomic: "1"') : v,
      ]),
    );
    await db.query('UPDATE snapshots SET files = $2 WHERE hash = $1', [snapshot.hash, edited]);
    const replayed = await service.cli(['audit', 'replay', quoteRecord.id]);
    assert.equal(replayed.code, 1);
    assert.match(replayed.stdout, /was edited \(its files no longer hash to it\)/);
    await db.query('UPDATE snapshots SET files = $2 WHERE hash = $1', [snapshot.hash, snapshot.files]);

    // An edit that bypasses the trigger (as a database owner can) leaves the row apart from its chained state.
    const orderId = upgraded.order.id;
    const amount = upgraded.order.amount.amount_atomic;
    await db.query('SET session_replication_role = replica');
    await db.query('UPDATE orders SET amount_atomic = 1 WHERE id = $1', [orderId]);
    result = await verify();
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      new RegExp(
        `order ${orderId}: amount_atomic is "1" in the orders table but "${amount}" in its last chained state`,
      ),
    );
    await db.query('UPDATE orders SET amount_atomic = $2 WHERE id = $1', [orderId, amount]);
    await db.query('SET session_replication_role = origin');
    assert.equal((await verify()).code, 0, 'restored');
  });

  test('an order edit through the trigger is chained, and verify says the terms changed', async () => {
    const orderId = upgraded.order.id;
    await db.query('UPDATE orders SET amount_atomic = 2 WHERE id = $1', [orderId]);
    const result = await verify();
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      new RegExp(`order ${orderId}: amount_atomic changed from "${upgraded.order.amount.amount_atomic}" to "2"`),
    );
    // An active order whose chained state lost its settlement: provisioned without being paid, as far as it shows.
    await db.query('UPDATE orders SET settlement = NULL WHERE id = $1', [streamOrderId]);
    assert.match((await verify()).stderr, new RegExp(`order ${streamOrderId}: active without a settlement`));
  });

  test('a whole rewrite with recomputed hashes is caught by the signed heads, and by a head an auditor kept', async () => {
    const quoted = await request(service, 'POST', '/quotes', {
      body: { product_id: 'instant-stream', parameters: { duration_hours: 3, max_listeners: 2, bitrate_kbps: 64 } },
    });
    assert.equal(quoted.status, 200);
    const target = quoted.body.quote.audit.evaluation_id;
    const quotedSeq = (await db.query('SELECT seq::text FROM audit_records WHERE id = $1', [target])).rows[0].seq;
    const kept = await waitForHead(
      async (h) => BigInt(await seqOfLink(h.signed_head.head.chain_hash)) >= BigInt(quotedSeq),
    );
    const keptFile = join(await scratchDir('audit-head-'), 'head.json');
    await writeFile(keptFile, JSON.stringify(kept.signed_head));
    // The attacker rewrites a record and recomputes every hash after it, as the schema's own functions do.
    await db.query(`DO $$
      DECLARE r record; prev text; first bigint;
      BEGIN
        UPDATE audit_records SET record = replace(record, '"total_atomic":"', '"total_atomic":"9'),
          record_hash = 'sha256:' || encode(sha256(convert_to(replace(record, '"total_atomic":"', '"total_atomic":"9'), 'UTF8')), 'hex')
        WHERE id = '${target}' RETURNING seq, prev_chain_hash INTO first, prev;
        FOR r IN SELECT * FROM audit_records WHERE seq >= first ORDER BY seq LOOP
          UPDATE audit_records SET prev_chain_hash = prev,
            chain_hash = audit_chain_hash(prev, audit_entry_hash(r.seq, r.id, r.kind, r.snapshot_hash, r.subject, r.record_hash, r.created_at))
          WHERE seq = r.seq RETURNING chain_hash INTO prev;
        END LOOP;
        UPDATE audit_head SET chain_hash = prev;
      END $$`);
    let result = await verify();
    assert.equal(result.code, 1);
    assert.match(result.stderr, /does not end in the signed head.*the log up to here was rewritten/);

    // Without the heads kept in the database, the auditor's own copy still proves it.
    await db.query('DELETE FROM audit_signed_heads');
    result = await verify('--head', keptFile);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /does not end in the signed head.*head given.*rewritten/);
    const forged = { ...kept.signed_head, head: { ...kept.signed_head.head, chain_hash: 'sha256:' + '1'.repeat(64) } };
    await writeFile(keptFile, JSON.stringify(forged));
    result = await verify('--head', keptFile);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /signature does not verify/);
  });
});

/** The signed head, once it covers what the test needs (heads are signed at most once a second). */
async function waitForHead(covers: (body: any) => Promise<boolean>): Promise<any> {
  for (let i = 0; i < 100; i++) {
    const answer = await request(service, 'GET', '/audit/head', { auth: false });
    assert.equal(answer.status, 200);
    if (await covers(answer.body)) return answer.body;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('the signed head did not move on');
}

/** The seq of the record whose link is this chain hash (-1 when none): a public head names its place by its link. */
async function seqOfLink(chainHash: string): Promise<string> {
  return (
    (await db.query('SELECT seq::text FROM audit_records WHERE chain_hash = $1', [chainHash])).rows[0]?.seq ?? '-1'
  );
}
