import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { publishedSchemas, schemaText } from '../src/catalog/index.js';
import { changes, priceTable } from '../src/catalog-review/price-table.js';
import {
  evaluatePrice,
  openSnapshot,
  readSnapshotFiles,
  type Snapshot,
  type SnapshotFiles,
} from '../src/pricing/index.js';
import { createAjv } from '../src/schema/ajv.js';
import { catalogCommand } from './support/catalog-command.js';
import { cli, copyCatalog, root, startService, type Service } from './support/service.js';

type Copy = Awaited<ReturnType<typeof copyCatalog>>;
let copy: Copy;
/**
 * The running service the default comparison reads, started while the other tests run (most of its start is waiting):
 * on a copy of its own, which the edits of those tests leave alone.
 */
let served: Promise<{ service: Service; copy: Copy }>;
before(async () => {
  copy = await copyCatalog();
  served = copyCatalog().then(async (own) => ({
    copy: own,
    // The API alone serves the catalog: no streaming host is needed to read what it serves.
    service: await startService({ CATALOG_DIR: own.catalogDir, RULES_DIR: own.rulesDir }, { args: ['--role', 'api'] }),
  }));
  served.catch(() => {}); // reported by the test that awaits it
});
after(async () => {
  await copy.remove();
  const started = await served.catch(() => undefined);
  await started?.service.stop();
  await started?.copy.remove();
});

const env = () => ({ CATALOG_DIR: copy.catalogDir, RULES_DIR: copy.rulesDir });
/**
 * The same command run in this process (support/catalog-command.ts), for the variations of a behaviour a real CLI run
 * of this file covers: diff as --json and as text (against the running service), against a folder, a git ref, its
 * errors; preview as text, and a configuration it cannot price. Diffs in one process reuse the prices of the catalog
 * versions they share, as an editor's would.
 */
const inProcess = (args: string[]) => catalogCommand(args, env());

/** Edits one file of the copy for the duration of `work`. */
async function withEdit<T>(file: string, edit: (text: string) => string, work: () => Promise<T>): Promise<T> {
  const path = join(copy.dir, file);
  const original = await readFile(path, 'utf8');
  const edited = edit(original);
  assert.notEqual(edited, original, 'the edit must change the file');
  await writeFile(path, edited);
  try {
    return await work();
  } finally {
    await writeFile(path, original);
  }
}

const cheaperTransfer = (t: string) =>
  t
    .replace('per_gb_atomic: "15000"', 'per_gb_atomic: "10000"')
    .replace('transfer_gb x 0.015 USDC', 'transfer_gb x 0.01 USDC');

describe('catalog diff', () => {
  test('a cheaper transfer rate in the shipped catalog shows the price table and exits 3', async () => {
    const result = await withEdit('catalog/products/instant-stream.yaml', cheaperTransfer, () =>
      inProcess(['catalog', 'diff', '--against', root]),
    );
    assert.equal(result.code, 3, result.stderr);
    const out = result.stdout;
    assert.match(out, /^instant-stream: changed$/m);
    assert.match(out, /^ {2}\/pricing\/per_gb_atomic: "15000" -> "10000"$/m);
    assert.match(out, /^ {2}\/pricing\/formula: ".*0\.015 USDC\)" -> ".*0\.01 USDC\)"$/m);
    // transfer_gb 0 costs the same; 25, 50, 75 and 100 GB each cost 0.005 USDC less per GB, with recording or without.
    assert.match(out, /^ {2}prices: 160 of 200 configurations change; 0 become orderable, 0 stop being orderable$/m);
    assert.match(
      out,
      /^ {4}duration_hours=1 max_listeners=1 bitrate_kbps=16 transfer_gb=25 recording=false: 0\.645 -> 0\.52 {2}-125000 atomic \(-19\.38%\)$/m,
    );
    assert.match(
      out,
      /^ {4}duration_hours=1 max_listeners=1 bitrate_kbps=16 transfer_gb=100 recording=false: 1\.77 -> 1\.27 {2}-500000 atomic \(-28\.25%\)$/m,
    );
    assert.match(out, /^event-stream: unchanged \(2000 configurations, same prices\)$/m);
    assert.match(out, /^prices change$/m);
  });

  test('--json gives every row with the change in atomic units and percent', async () => {
    const result = await withEdit('catalog/products/instant-stream.yaml', cheaperTransfer, () =>
      cli(['catalog', 'diff', '--against', root, '--json'], env(), 300_000),
    );
    assert.equal(result.code, 3, result.stderr);
    const diff = JSON.parse(result.stdout);
    assert.equal(diff.prices_change, true);
    const product = diff.products.find((p: any) => p.product_id === 'instant-stream');
    assert.equal(product.changed_rows.length, 160);
    const row = product.changed_rows.find(
      (r: any) =>
        r.configuration.duration_hours === 720 &&
        r.configuration.transfer_gb === 100 &&
        r.configuration.max_listeners === 50 &&
        r.configuration.bitrate_kbps === 128 &&
        r.configuration.recording === false,
    );
    assert.deepEqual(row, {
      configuration: { duration_hours: 720, max_listeners: 50, bitrate_kbps: 128, transfer_gb: 100, recording: false },
      before: { priced: true, total_atomic: '16150000', amount: '16.15', orderable: true },
      after: { priced: true, total_atomic: '15650000', amount: '15.65', orderable: true },
      change_atomic: '-500000',
      change_percent: '-3.10',
    });
    assert.ok(
      diff.products
        .filter((p: any) => p.product_id !== 'instant-stream')
        .every((p: any) => p.changed_rows.length === 0),
    );
  });

  test('a lower parameter maximum shows which configurations stop being orderable', async () => {
    const result = await withEdit(
      'catalog/products/event-stream.yaml',
      (t) =>
        t.replace(
          'max_listeners: { type: integer, required: true, minimum: 1, maximum: 50 }',
          'max_listeners: { type: integer, required: true, minimum: 1, maximum: 40 }',
        ),
      () => inProcess(['catalog', 'diff', '--against', root, '--json']),
    );
    assert.equal(result.code, 3, result.stderr);
    const product = JSON.parse(result.stdout).products.find((p: any) => p.product_id === 'event-stream');
    assert.ok(product.changed_rows.length > 0);
    for (const row of product.changed_rows) {
      assert.equal(row.configuration.max_listeners, 50);
      assert.equal(row.orderability, 'stops_being_orderable');
      assert.deepEqual(row.after, { priced: false, code: 'invalid_parameters' });
    }
    assert.deepEqual(product.fields, [{ pointer: '/parameters/max_listeners/maximum', before: 50, after: 40 }]);
  });

  test('no edit: exit 0, no price changes', async () => {
    const result = await inProcess(['catalog', 'diff', '--against', root, '--progress']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^no price changes$/m);
    assert.doesNotMatch(result.stdout, /: changed$/m);
    // Progress for the big grid of temporary-autodj (packages x storage x transfer ...) goes to stderr (asked for: not a terminal here).
    assert.match(result.stderr, /^pricing temporary-autodj: (\d+)\/\1 configurations before and after$/m);
  });

  test('a changed rule is named, and under each product it fired for; without a price change the exit is 0', async () => {
    const result = await withEdit(
      'rules/pricing.json',
      (t) => t.replace('"sequence": 30', '"sequence": 31'),
      () => inProcess(['catalog', 'diff', '--against', root]),
    );
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^rules:\n {2}transfer \(rules\/pricing\.json\): changed$/m);
    assert.match(
      result.stdout,
      /^instant-stream: changed\n {2}rule transfer changed \(fired for this product\)\n {2}prices: 0 of 200 configurations change/m,
    );
    assert.match(result.stdout, /^radio-local: unchanged/m);
    assert.match(result.stdout, /^no price changes$/m);
  });

  test('--against a git commit compares with catalog/ and rules/ as committed', async () => {
    const git = (...args: string[]) =>
      promisify(execFile)('git', [
        '-C',
        copy.dir,
        '-c',
        'user.name=test',
        '-c',
        'user.email=test@example.com',
        ...args,
      ]);
    await git('init', '-q');
    await git('add', 'catalog', 'rules');
    await git('commit', '-q', '-m', 'shipped catalog');
    const result = await withEdit('catalog/products/instant-stream.yaml', cheaperTransfer, () =>
      inProcess(['catalog', 'diff', '--against', 'HEAD']),
    );
    assert.equal(result.code, 3, result.stderr);
    assert.match(result.stdout, /compared with git HEAD/);
    assert.match(result.stdout, /^ {2}prices: 160 of 200 configurations change/m);
    const unknown = await cli(['catalog', 'diff', '--against', 'no-such-ref'], env());
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no-such-ref is not a commit/);
  });

  test('an invalid catalog on disk is an error (exit 1), not a price change', async () => {
    const result = await withEdit(
      'catalog/products/instant-stream.yaml',
      (t) => t.replace('per_gb_atomic: "15000"', 'per_gb_atomic: "10000"'),
      () => inProcess(['catalog', 'diff', '--against', root]),
    );
    assert.equal(result.code, 1);
    assert.match(result.stderr, /instant-stream\.yaml:\d+:\d+: the formula says transfer_gb x 0\.015 USDC/);
  });
});

describe('the price table', () => {
  const shipped = () => readSnapshotFiles(join(root, 'catalog'), join(root, 'rules'));
  const opened = async (files: SnapshotFiles) => {
    const { snapshot, diagnostics } = await openSnapshot(files);
    assert.ok(snapshot, JSON.stringify(diagnostics));
    return snapshot;
  };
  /** Each side of every row, priced again on its own by the function orders are priced with. */
  const assertPricedAsOrders = async (before: Snapshot, after: Snapshot, ids: string[]) => {
    for (const id of ids) {
      const table = await priceTable(id, before, after);
      assert.ok(table.rows.length > 0, id);
      for (const row of table.rows) {
        for (const [side, snapshot] of [
          ['before', before],
          ['after', after],
        ] as const) {
          const input = { product_id: id, parameters: row.configuration, ...(row.billing && { billing: row.billing }) };
          const evaluation = await evaluatePrice(snapshot, input);
          const expected =
            evaluation.outcome === 'priced'
              ? {
                  priced: true,
                  total_atomic: evaluation.output.total_atomic,
                  amount: evaluation.output.amount,
                  orderable: evaluation.output.agent_orderable,
                }
              : {
                  priced: false,
                  code: evaluation.outcome === 'rejected' ? evaluation.rejection.code : 'no_such_product',
                };
          assert.deepEqual(row[side], expected, `${id} ${side} ${JSON.stringify(input)}`);
        }
      }
    }
  };
  const small = ['radio-directo', 'radio-local', 'radio-local-plus', 'instant-stream', 'streaming-boost-relay'];
  const smallToo = ['temporary-audio', 'audio-storage-api'];

  test('every price, changed or not, is the one orders get on that side, when the settings and a product change', async () => {
    const files = shipped();
    const edited = { ...files };
    edited['catalog/catalog.yaml'] = files['catalog/catalog.yaml'].replace('EUR_USDC: "1.08"', 'EUR_USDC: "1.10"');
    edited['catalog/products/instant-stream.yaml'] = cheaperTransfer(files['catalog/products/instant-stream.yaml']);
    const before = await opened(files);
    const after = await opened(edited);
    await assertPricedAsOrders(before, after, [...small, ...smallToo]);
    // The exchange rate is read for the subscriptions priced in EUR: each of their prices changes.
    const radio = await priceTable('radio-directo', before, after);
    assert.equal(radio.rows.filter(changes).length, radio.configurations);
  });

  test('every price is the one orders get on that side, when one product changes and the others are priced once', async () => {
    const files = shipped();
    const edited = { ...files };
    edited['catalog/products/instant-stream.yaml'] = cheaperTransfer(files['catalog/products/instant-stream.yaml']);
    await assertPricedAsOrders(await opened(files), await opened(edited), [...small, ...smallToo]);
  });
});

describe('catalog diff against the running service', () => {
  test('by default it compares with what the service serves', async () => {
    const { service } = await served;
    // The service watches its copy; the edited files live elsewhere, so what is served stays the shipped catalog.
    const edited = await copyCatalog();
    try {
      const path = join(edited.catalogDir, 'products/instant-stream.yaml');
      await writeFile(path, cheaperTransfer(await readFile(path, 'utf8')));
      const result = await cli(
        ['catalog', 'diff'],
        { ...service.env, CATALOG_DIR: edited.catalogDir, RULES_DIR: edited.rulesDir },
        300_000,
      );
      assert.equal(result.code, 3, result.stderr);
      assert.match(result.stdout, /compared with served sha256:[0-9a-f]{64}/);
      assert.match(result.stdout, /^ {2}prices: 160 of 200 configurations change/m);
    } finally {
      await edited.remove();
    }
  });
});

describe('catalog preview', () => {
  const configuration = ['duration_hours=2', 'max_listeners=10', 'bitrate_kbps=128', 'transfer_gb=1'];
  const previewArgs = ['catalog', 'preview', 'instant-stream', ...configuration.flatMap((p) => ['--param', p])];
  test('one price with its lines and the rules that fired, from the files on disk', async () => {
    const result = await cli(previewArgs, env());
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(result.stdout.split('\n').slice(0, 7), [
      'instant-stream duration_hours=2 max_listeners=10 bitrate_kbps=128 transfer_gb=1',
      '  base                 1 order x 0.25 = 0.25 USDC',
      '  duration             2 hour x 0.02 = 0.04 USDC',
      '  transfer             1 GB x 0.015 = 0.015 USDC',
      '  total 0.305 USDC (305000 atomic units, 6 decimals)',
      '  agents can order it: yes',
      '  rules fired: formula-base, formula-duration, transfer',
    ]);
    const edited = await withEdit('catalog/products/instant-stream.yaml', cheaperTransfer, () =>
      inProcess([...previewArgs, '--json']),
    );
    assert.equal(edited.code, 0, edited.stderr);
    const document = JSON.parse(edited.stdout);
    assert.equal(document.total_atomic, '300000');
    assert.deepEqual(document.rules_fired, ['formula-base', 'formula-duration', 'transfer']);
  });

  test('a configuration that cannot be priced says why and exits 1', async () => {
    const invalid = await cli(['catalog', 'preview', 'instant-stream', '--param', 'duration_hours=0'], env());
    assert.equal(invalid.code, 1);
    assert.match(invalid.stderr, /^not priced \(invalid_parameters\): .*duration_hours must be >= 1/);
    const unknown = await inProcess(['catalog', 'preview', 'instant-streams']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^no product instant-streams; the catalog has: radio-directo, /);
    const malformed = await inProcess(['catalog', 'preview', 'instant-stream', '--param', 'duration_hours']);
    assert.equal(malformed.code, 2);
    assert.match(malformed.stderr, /write NAME=VALUE/);
  });
});

describe('published JSON Schemas', () => {
  test('schemas/ holds exactly what scripts/generate-schemas.ts generates from the validating schemas', async () => {
    for (const [file, schema] of Object.entries(publishedSchemas())) {
      assert.equal(
        await readFile(join(root, 'schemas', file), 'utf8'),
        schemaText(schema),
        `schemas/${file} is stale: run npx tsx scripts/generate-schemas.ts`,
      );
    }
  });

  test('every shipped YAML file names its schema for editors', async () => {
    const catalog = await readFile(join(root, 'catalog/catalog.yaml'), 'utf8');
    assert.match(catalog, /^# yaml-language-server: \$schema=\.\.\/schemas\/catalog\.schema\.json\n/);
    // The published files are schemas a standard validator accepts, and the shipped files are valid against them.
    const ajv = createAjv();
    const load = async (name: string) => {
      const schema = JSON.parse(await readFile(join(root, 'schemas', name), 'utf8'));
      assert.ok(ajv.validateSchema(schema), `${name}: ${ajv.errorsText(ajv.errors)}`); // against the 2020-12 meta-schema
      return schema;
    };
    assert.ok(ajv.validate(await load('catalog.schema.json'), parse(catalog)), JSON.stringify(ajv.errors));
    const validateProduct = ajv.compile(await load('product.schema.json'));
    const products = (await readdir(join(root, 'catalog/products'))).filter((f) => f.endsWith('.yaml'));
    assert.ok(products.length >= 9);
    for (const file of products) {
      const text = await readFile(join(root, 'catalog/products', file), 'utf8');
      assert.match(text, /^# yaml-language-server: \$schema=\.\.\/\.\.\/schemas\/product\.schema\.json\n/);
      assert.ok(validateProduct(parse(text)), `${file}: ${JSON.stringify(validateProduct.errors)}`);
    }
  });
});
