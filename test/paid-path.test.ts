import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import { numberToHex, pad, parseAbi, toEventSelector, type Hex, type TransactionReceipt } from 'viem';
import { AuthorizationLedger, SettledReceipts } from '../src/payments/index.js';
import { buy } from './support/purchase.js';
import { startService, type Service } from './support/service.js';
import { requireStreamingTools } from './support/system-tools.js';
import { buyerWallet } from './support/dev-file.js';
import { connectDatabase } from './support/serve-lock.js';

requireStreamingTools();

const token = '0x833589fcd6edb6e08f4c3c23f5b6a2a8b2a8c7a1' as Hex;
const payer = '0x70997970c51812dc3a010c7d01b50e0d17dc79c8';
const payTo = '0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc';
const nonce = `0x${'ab'.repeat(32)}` as Hex;
const transaction = `0x${'11'.repeat(32)}` as Hex;
const [USED, TRANSFER] = parseAbi([
  'event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)',
  'event Transfer(address indexed from, address indexed to, uint256 value)',
]).map((e) => toEventSelector(e));

/** A settlement's receipt as viem returns it: the token's AuthorizationUsed and Transfer logs. */
function receipt(amount: bigint): TransactionReceipt {
  const log = (topics: Hex[], data: Hex, logIndex: number) => ({
    address: token,
    topics,
    data,
    blockNumber: 42n,
    blockHash: `0x${'22'.repeat(32)}` as Hex,
    transactionHash: transaction,
    logIndex,
    transactionIndex: 0,
    removed: false,
  });
  return {
    status: 'success',
    transactionHash: transaction,
    blockNumber: 42n,
    logs: [
      log([USED, pad(payer as Hex), nonce], '0x', 0),
      log([TRANSFER, pad(payer as Hex), pad(payTo as Hex)], numberToHex(amount, { size: 32 }), 1),
    ],
  } as unknown as TransactionReceipt;
}

describe('proof of payment from the settlement receipt the facilitator already has', () => {
  // The node is unreachable: only the remembered receipt can prove anything.
  const expected = { payer, nonce, payTo, amount: '270000', fromBlock: 40n };

  test('the exact transfer in the remembered receipt is proof, without asking the node again', async () => {
    const receipts = new SettledReceipts();
    receipts.remember(receipt(270000n));
    const ledger = new AuthorizationLedger('http://127.0.0.1:9', token, { settledReceipts: receipts });
    const evidence = await ledger.evidenceOfTransaction(transaction, expected);
    assert.equal(evidence?.kind, 'paid');
    assert.equal(evidence.kind === 'paid' && evidence.proof.logs.length, 2);
  });

  test('a remembered receipt is judged like any other: another amount is no payment', async () => {
    const receipts = new SettledReceipts();
    receipts.remember(receipt(1n));
    const ledger = new AuthorizationLedger('http://127.0.0.1:9', token, { settledReceipts: receipts });
    assert.equal((await ledger.evidenceOfTransaction(transaction, expected))?.kind, 'spent_elsewhere');
  });
});

describe('a paid order', () => {
  let service: Service | undefined;
  let db: pg.Client | undefined;
  after(async () => {
    await db?.end();
    await service?.stop();
  });

  test('a new stream is settled and provisioned in one statement, chained as settling → active', async () => {
    service = await startService();
    const wallet = await buyerWallet(service);
    const bought = await buy(service, wallet, {
      product_id: 'instant-stream',
      email: 'paid@example.com',
      station_name: 'Paid FM',
      parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
    });
    assert.equal(bought.status, 200, JSON.stringify(bought.body));
    db = await connectDatabase(service);
    const { rows } = await db.query<{ state: string; transaction: string | null; tx: string }>(
      `SELECT record::jsonb ->> 'state' AS state, record::jsonb -> 'settlement' ->> 'transaction' AS transaction,
              xmin::text AS tx
       FROM audit_records WHERE subject = $1 ORDER BY seq`,
      [bought.body.order.id],
    );
    assert.deepEqual(
      rows.map((r) => r.state),
      ['settling', 'active'],
    );
    assert.match(rows[1].transaction ?? '', /^0x[0-9a-f]{64}$/, 'the active state carries its settlement');
    assert.notEqual(rows[0].tx, rows[1].tx, 'the claim is committed before the settlement is sent');
    const {
      rows: [stored],
    } = await db.query(
      `SELECT s.expires_at, o.settled_at, e.types, e.txs
       FROM services s JOIN orders o ON o.id = s.order_id,
            LATERAL (SELECT array_agg(type ORDER BY seq) AS types,
                            array_agg(DISTINCT (tx::text::bigint % 4294967296)::text) AS txs
                     FROM events WHERE order_id = o.id) e
       WHERE o.id = $1`,
      [bought.body.order.id],
    );
    // The service row changes after its start (usage, status reason), so its xmin cannot tell; its service.active
    // event, inserted by the statement that inserts it, can (events are never updated).
    assert.deepEqual(stored.txs, [rows[1].tx], 'the service and both events are committed with the settlement');
    assert.deepEqual(stored.types, ['order.paid', 'service.active'], 'both events, in this order');
    assert.equal(stored.expires_at.getTime() - stored.settled_at.getTime(), 3_600_000, 'an hour from the settlement');
    assert.equal(bought.body.order.payment.block_number !== null, true, 'the proof is recorded');
  });
});
