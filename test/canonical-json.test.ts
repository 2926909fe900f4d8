import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { createHash } from 'node:crypto';
import { canonicalJson, priceRecord, priceRecordText, sha256, TextTemplate } from '../src/audit/index.js';
import {
  configurations,
  evaluatePrice,
  openSnapshot,
  readSnapshotFiles,
  thresholds,
  type PriceEvaluation,
  type PriceInput,
  type Snapshot,
} from '../src/pricing/index.js';
import { root } from './support/service.js';

/** The original canonical serializer (filter/sort/map/join), kept here as the reference the fast one must equal byte for byte. */
function referenceCanonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError(`cannot encode ${typeof value} canonically`);
    return text;
  }
  if (Array.isArray(value))
    return `[${value.map((v) => (v === undefined ? 'null' : referenceCanonicalJson(v))).join(',')}]`;
  const entries = Object.keys(value)
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${referenceCanonicalJson((value as Record<string, unknown>)[k])}`);
  return `{${entries.join(',')}}`;
}

/** A small deterministic PRNG (mulberry32), so a failure names a seed that reproduces it. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const keyPool = [
  'a',
  'b',
  'B',
  '_',
  '0',
  '1',
  '10',
  '2',
  'é',
  'ä',
  '\u{1F600}',
  '"q"',
  'back\\slash',
  'line\nbreak',
  '',
  'amount_atomic',
  'rate',
  'z',
  'Z',
  '\u0000',
  'toString',
  'constructor',
];
const stringPool = [
  '',
  'plain',
  'with "quotes"',
  'tab\tand\nnewline',
  '\u2028\u2029',
  'é\u{1F600}',
  '\ud800',
  '0.31',
  'sha256:00ff',
  '</script>',
];
const numberPool = [
  0,
  -0,
  1,
  -1,
  0.1,
  1e21,
  1e-7,
  123456789012345680000,
  Number.MAX_SAFE_INTEGER,
  5e-324,
  NaN,
  Infinity,
  -Infinity,
  3.0000000000000004,
];

function generate(next: () => number, depth: number): unknown {
  const pick = <T>(list: T[]) => list[Math.floor(next() * list.length)];
  const kind = depth <= 0 ? Math.floor(next() * 5) : Math.floor(next() * 8);
  switch (kind) {
    case 0:
      return pick(numberPool);
    case 1:
      return pick(stringPool);
    case 2:
      return pick([true, false, null]);
    case 3:
      return Math.floor(next() * 1e6) / 100;
    case 4:
      return pick(stringPool) + String(Math.floor(next() * 100));
    case 5:
    case 6: {
      const object: Record<string, unknown> = {};
      const size = Math.floor(next() * 7);
      for (let i = 0; i < size; i++) object[pick(keyPool)] = next() < 0.1 ? undefined : generate(next, depth - 1);
      return object;
    }
    default: {
      const size = Math.floor(next() * 6);
      const array: unknown[] = [];
      for (let i = 0; i < size; i++) array.push(next() < 0.1 ? undefined : generate(next, depth - 1));
      if (next() < 0.1) array[size + 2] = generate(next, 0); // leaves holes
      return array;
    }
  }
}

type Priced = Extract<PriceEvaluation, { outcome: 'priced' }>;

async function shippedSnapshot(): Promise<Snapshot> {
  const { snapshot } = await openSnapshot(readSnapshotFiles(join(root, 'catalog'), join(root, 'rules')));
  assert.ok(snapshot);
  return snapshot;
}

/** Every shipped product over a grid of its configurations (and the given billings), where it is priced. */
async function* pricedGrid(
  snapshot: Snapshot,
  billings: Array<PriceInput['billing']>,
): AsyncGenerator<{ input: PriceInput; priced: Priced }> {
  for (const entry of snapshot.catalog.products) {
    for (const parameters of configurations(entry, thresholds(snapshot, entry), {
      between: 1,
      acrossThresholds: true,
    })) {
      for (const billing of billings) {
        const input = { product_id: entry.product.id, parameters, ...(billing && { billing }) };
        const evaluation = await evaluatePrice(snapshot, input);
        if (evaluation.outcome === 'priced') yield { input, priced: evaluation };
      }
    }
  }
}

describe('canonical JSON', () => {
  test('the fast serializer writes exactly the bytes of the reference one for 20,000 generated values', () => {
    for (let seed = 1; seed <= 20_000; seed++) {
      const value = generate(random(seed), 5);
      assert.equal(canonicalJson(value), referenceCanonicalJson(value), `seed ${seed}`);
    }
  });

  test('sha256 gives the digest of the UTF-8 bytes, as createHash does (lone surrogates included)', () => {
    for (const text of [
      '',
      'plain',
      'é\u{1F600}',
      '\ud800 lone',
      'x'.repeat(5000),
      referenceCanonicalJson(generate(random(7), 5)),
    ]) {
      assert.equal(sha256(text), `sha256:${createHash('sha256').update(text, 'utf8').digest('hex')}`);
    }
  });

  test('it refuses what the reference refuses', () => {
    for (const value of [undefined, () => 1, Symbol('s'), [() => 1], { a: [Symbol('s')] }]) {
      assert.throws(() => referenceCanonicalJson(value));
      assert.throws(() => canonicalJson(value));
    }
  });

  test('price records (with their output serialized once) are the canonical JSON of the record, for every product over a grid of configurations', async () => {
    const snapshot = await shippedSnapshot();
    let checked = 0;
    for await (const { input, priced } of pricedGrid(snapshot, [undefined, 'monthly'])) {
      const { record, text } = priceRecord(
        `ev_${checked}`,
        snapshot.hash,
        input,
        priced,
        new Date(1_700_000_000_000 + checked),
      );
      assert.equal(text, referenceCanonicalJson(record));
      assert.equal(
        record.output_hash,
        `sha256:${createHash('sha256').update(referenceCanonicalJson(record.output)).digest('hex')}`,
      );
      checked++;
    }
    assert.ok(checked > 100, `only ${checked} priced configurations were checked`);
  });

  test('a text template filled in gives the bytes of serializing the value with those fields, for 5,000 generated values', () => {
    const next = random(4242);
    const pick = <T>(list: T[]) => list[Math.floor(next() * list.length)];
    for (let i = 0; i < 5_000; i++) {
      const base = generate(next, 3);
      const value: Record<string, unknown> =
        base !== null && typeof base === 'object' && !Array.isArray(base)
          ? (base as Record<string, unknown>)
          : { v: base };
      // Holes at the top level and one level down, among generated fields.
      const nested: Record<string, unknown> = { ...(generate(next, 1) as object), inner: '' };
      const place = (holes: Record<'id' | 'at' | 'inner', string>) => ({
        ...value,
        id: holes.id,
        nested: { ...nested, inner: holes.inner },
        at: holes.at,
      });
      const filled = { id: pick(stringPool) + String(i), at: pick(stringPool), inner: pick(keyPool) };
      for (const serialize of [canonicalJson, JSON.stringify]) {
        const template = TextTemplate.of(['id', 'at', 'inner'], (holes) => serialize(place(holes)));
        assert.ok(template, `seed 4242, value ${i}: no template`);
        assert.equal(template.fill(filled), serialize(place(filled)), `seed 4242, value ${i}`);
      }
    }
  });

  test('a value whose hole is left out or written twice gets no template', () => {
    assert.equal(
      TextTemplate.of(['id', 'at'], (holes) => JSON.stringify({ id: holes.id })),
      undefined,
    );
    assert.equal(
      TextTemplate.of(['id'], (holes) => JSON.stringify({ id: holes.id, again: holes.id })),
      undefined,
    );
    assert.equal(
      TextTemplate.of(['id'], (holes) => JSON.stringify({ id: holes.id }))?.fill({ id: 'qt_"1"' }),
      '{"id":"qt_\\"1\\""}',
    );
  });

  test('a reused serialization is written in full once, then made a template and only filled in', () => {
    let serialized = 0;
    const value = (fields: Record<'id' | 'at', string>) => ({
      kind: 'quote',
      id: fields.id,
      nested: { at: fields.at, n: 1.5 },
    });
    const text = TextTemplate.reused(['id', 'at'], (fields) => {
      serialized++;
      return canonicalJson(value(fields));
    });
    for (let i = 0; i < 5; i++) {
      const fields = { id: `qt_${i}"\\`, at: new Date(1_700_000_000_000 + i).toISOString() };
      assert.equal(text(fields), canonicalJson(value(fields)));
    }
    assert.equal(serialized, 2, 'the first call in full, the second to make the template, none after');
  });

  test('a price record filled in from its template is the record priceRecord writes, with its hash, for every product over a grid', async () => {
    const snapshot = await shippedSnapshot();
    let checked = 0;
    for await (const { input, priced } of pricedGrid(snapshot, [undefined])) {
      // A quote's record, and an order's (src/orders/sale.ts fills one template per memoized price).
      for (const kind of ['quote_price', 'order_price'] as const) {
        const fill = priceRecordText(snapshot.hash, input, priced, kind);
        // The same template for several records, as a memoized evaluation is used.
        for (const id of [`ev_${checked}`, 'ev_"quoted"\\', 'ev_é\u{1F600}']) {
          const at = new Date(1_700_000_000_000 + checked * 7919);
          const { text, hash } = priceRecord(id, snapshot.hash, input, priced, at, kind);
          assert.deepEqual(fill(id, at), { text, hash });
        }
      }
      checked++;
    }
    assert.ok(checked > 50, `only ${checked} priced configurations were checked`);
  });
});
