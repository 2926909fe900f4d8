import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { catalogCommand } from './support/catalog-command.js';
import { cli, copyCatalog } from './support/service.js';

type Copy = Awaited<ReturnType<typeof copyCatalog>>;
let copy: Copy;
const originals = new Map<string, string>();

before(async () => {
  copy = await copyCatalog();
});
after(async () => {
  await copy.remove();
});

/**
 * Applies an edit to one file, runs `catalog check`, restores the file. The command runs in this process
 * (support/catalog-command.ts) unless `run` is the real CLI: the tests that run it cover its wiring, text and --json,
 * exit 0 and 1.
 */
async function checkWith(file: string, edit: (text: string) => string, run = catalogCommand) {
  const path = join(copy.dir, file);
  if (!originals.has(path)) originals.set(path, await readFile(path, 'utf8'));
  const original = originals.get(path)!;
  const edited = edit(original);
  assert.notEqual(edited, original, 'the edit must change the file');
  await writeFile(path, edited);
  try {
    return await run(['catalog', 'check'], { CATALOG_DIR: copy.catalogDir, RULES_DIR: copy.rulesDir });
  } finally {
    await writeFile(path, original);
  }
}

function lineOf(text: string, needle: string): number {
  return text.split('\n').findIndex((l) => l.includes(needle)) + 1;
}

describe('catalog check', () => {
  test('the shipped catalog and rules are valid', async () => {
    const result = await cli(['catalog', 'check'], { CATALOG_DIR: copy.catalogDir, RULES_DIR: copy.rulesDir });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /catalog_version 2, 9 products, content hash sha256:[0-9a-f]{64}: ok/);
  });

  test('a wrong type names file, line and column', async () => {
    const file = 'catalog/products/instant-stream.yaml';
    const text = await readFile(join(copy.dir, file), 'utf8');
    // The real CLI: a problem in text on stderr, exit 1.
    const result = await checkWith(file, (t) => t.replace('per_hour_atomic: "20000"', 'per_hour_atomic: 20000'), cli);
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      new RegExp(`^catalog/products/instant-stream\\.yaml:${lineOf(text, 'per_hour_atomic')}:20: must be string`, 'm'),
    );
  });

  test('an unknown key is reported at the key', async () => {
    const file = 'catalog/products/event-stream.yaml';
    const text = await readFile(join(copy.dir, file), 'utf8');
    const result = await checkWith(file, (t) =>
      t.replace(
        'pricing_status: approved\nvisibility',
        'pricing_status: approved\nvisibilty: { human: true, agent: true }\nvisibility',
      ),
    );
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      new RegExp(
        `^catalog/products/event-stream\\.yaml:${lineOf(text, 'visibility:')}:1: visibilty is not allowed here$`,
        'm',
      ),
    );
  });

  test('a fulfillment provider must be the panel provider or the operator', async () => {
    const file = 'catalog/products/audio-storage-api.yaml';
    const text = await readFile(join(copy.dir, file), 'utf8');
    const result = await checkWith(file, (t) => t.replace('provider: agent-audio', 'provider: someone-else'));
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      new RegExp(
        `^catalog/products/audio-storage-api\\.yaml:${lineOf(text, 'provider: agent-audio')}:\\d+: fulfillment provider someone-else is neither the panel provider \\(streaming-panel\\) nor the operator \\(agent-audio\\)`,
        'm',
      ),
    );
  });

  test('a YAML syntax error is reported with its position', async () => {
    const result = await checkWith('catalog/products/temporary-autodj.yaml', (t) =>
      t.replace('name: Temporary AutoDJ', 'name: [Temporary AutoDJ'),
    );
    assert.equal(result.code, 1);
    assert.match(result.stderr, /^catalog\/products\/temporary-autodj\.yaml:\d+:\d+: /m);
  });

  test('a rule with an unknown operator is reported in its JSON file', async () => {
    const file = 'rules/pricing.json';
    const text = await readFile(join(copy.dir, file), 'utf8');
    const result = await checkWith(file, (t) => t.replace('"operator": "in"', '"operator": "within"'));
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      new RegExp(`^rules/pricing\\.json:${lineOf(text, '"operator": "in"')}:\\d+: unknown operator within`, 'm'),
    );
  });

  test('a price that leaves the order limits is refused', async () => {
    const result = await checkWith('catalog/products/instant-stream.yaml', (t) =>
      t.replace('base_atomic: "250000"', 'base_atomic: "240000"'),
    );
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      /instant-stream\.yaml:\d+:\d+: the cheapest configuration .* costs 0\.26, below the order minimum 0\.27/,
    );
    const dear = await checkWith('catalog/products/event-stream.yaml', (t) =>
      t.replace('per_gb_atomic: "15000"', 'per_gb_atomic: "15001"'),
    );
    assert.equal(dear.code, 1);
    assert.match(
      dear.stderr,
      /event-stream\.yaml:\d+:\d+: the dearest configuration .* costs 16\.1501, above the order maximum 16\.15/,
    );
  });

  test('an agent-orderable product must be visible, approved and paid with x402', async () => {
    const file = 'catalog/products/radio-local.yaml';
    const text = await readFile(join(copy.dir, file), 'utf8');
    const result = await checkWith(file, (t) =>
      t.replace('orderable: { human: true, agent: false }', 'orderable: { human: true, agent: true }'),
    );
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      new RegExp(
        `^catalog/products/radio-local\\.yaml:${lineOf(text, 'orderable:')}:\\d+: an agent-orderable product .*no_machine_payment`,
        'm',
      ),
    );
  });

  test('a price rule that cannot price a product is reported, not a crash', async () => {
    const result = await checkWith('catalog/products/event-stream.yaml', (t) =>
      t.replace('  per_gb_atomic: "15000"\n', ''),
    );
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      /^catalog\/products\/event-stream\.yaml:\d+:\d+: a price rule cannot price this product: rule transfer: rate undefined/m,
    );
  });

  test('a product file not listed in catalog.yaml is refused', async () => {
    const result = await checkWith('catalog/catalog.yaml', (t) => t.replace('  - audio-storage-api\n', ''));
    assert.equal(result.code, 1);
    assert.match(result.stderr, /audio-storage-api\.yaml:1:1: product audio-storage-api is not listed/);
  });
});

describe('catalog check reports each problem once, at its cause', () => {
  const diagnosticLines = (stderr: string) => stderr.split('\n').filter((l) => /^\S+:\d+:\d+: /.test(l));

  test('a YAML syntax error at the end of a file is reported at its real line and column, with the line and a caret', async () => {
    const file = 'catalog/products/radio-local.yaml';
    const text = await readFile(join(copy.dir, file), 'utf8');
    const lastLine = text.trimEnd().split('\n').length + 1;
    const result = await checkWith(file, (t) => `${t}notes: "never closed\n`);
    assert.equal(result.code, 1);
    const lines = result.stderr.split('\n');
    const at = lines.findIndex((l) =>
      l.startsWith(`catalog/products/radio-local.yaml:${lastLine}:21: Missing closing "quote`),
    );
    assert.ok(at >= 0, result.stderr);
    assert.equal(lines[at + 1], `  ${lastLine} | notes: "never closed`);
    assert.equal(lines[at + 2], `${' '.repeat(`  ${lastLine} | `.length + 20)}^`);
  });

  test('one invalid product gives exactly one error (no follow-on "no file" or upgrade errors)', async () => {
    const file = 'catalog/products/event-stream.yaml';
    const text = await readFile(join(copy.dir, file), 'utf8');
    const result = await checkWith(file, (t) => t.replace('billing_type: quote', 'billing_type: quotes'));
    assert.equal(result.code, 1);
    assert.deepEqual(diagnosticLines(result.stderr), [
      `catalog/products/event-stream.yaml:${lineOf(text, 'billing_type')}:15: must be one of "subscription", "quote", "one_time"`,
    ]);
  });

  test('an AutoDJ a product includes is a yes or no, checked where it is written', async () => {
    const file = 'catalog/products/temporary-autodj.yaml';
    const text = await readFile(join(copy.dir, file), 'utf8');
    const result = await checkWith(file, (t) => t.replace('  autodj: true', '  autodj: always'));
    assert.equal(result.code, 1);
    assert.deepEqual(diagnosticLines(result.stderr), [
      `catalog/products/temporary-autodj.yaml:${lineOf(text, '  autodj: true')}:11: must be boolean`,
    ]);
  });

  test('an unknown product in the upgrade paths is reported once, where it is named', async () => {
    const file = 'catalog/catalog.yaml';
    const text = await readFile(join(copy.dir, file), 'utf8');
    const result = await checkWith(file, (t) =>
      t
        .replace('instant-stream: [event-stream]', 'instant-stream: [event-streams]')
        .replace('event-stream: [event-stream]', 'event-stream: [event-streams]'),
    );
    assert.equal(result.code, 1);
    assert.deepEqual(
      diagnosticLines(result.stderr).map((l) => l.replace(/;.*/, '')),
      [
        `catalog/catalog.yaml:${lineOf(text, 'instant-stream: [event-stream]')}:20: upgrade path names unknown product event-streams`,
      ],
    );
  });

  test('a rate that disagrees with the formula text agents read is refused at the formula', async () => {
    const file = 'catalog/products/instant-stream.yaml';
    const text = await readFile(join(copy.dir, file), 'utf8');
    const result = await checkWith(file, (t) => t.replace('per_gb_atomic: "15000"', 'per_gb_atomic: "10000"'));
    assert.equal(result.code, 1);
    assert.deepEqual(diagnosticLines(result.stderr), [
      `catalog/products/instant-stream.yaml:${lineOf(text, 'formula:')}:12: the formula says transfer_gb x 0.015 USDC, but pricing.per_gb_atomic "10000" charges 0.01 USDC: make the text say transfer_gb x 0.01 USDC, or change the rate`,
    ]);
    const both = await checkWith(file, (t) =>
      t
        .replace('per_gb_atomic: "15000"', 'per_gb_atomic: "10000"')
        .replace('transfer_gb x 0.015 USDC', 'transfer_gb x 0.01 USDC'),
    );
    assert.equal(both.code, 0, both.stderr);
    const dropped = await checkWith(file, (t) => t.replace(' + (transfer_gb x 0.015 USDC)', ''));
    assert.equal(dropped.code, 1);
    assert.match(dropped.stderr, /pricing\.per_gb_atomic charges for transfer_gb, but the formula does not say so/);
  });

  test('--json gives file, line, column, code and message, and the same exit codes', async () => {
    const file = 'catalog/products/instant-stream.yaml';
    const text = await readFile(join(copy.dir, file), 'utf8');
    const path = join(copy.dir, file);
    await writeFile(path, text.replace('per_hour_atomic: "20000"', 'per_hour_atomic: 20000'));
    try {
      const bad = await cli(['catalog', 'check', '--json'], { CATALOG_DIR: copy.catalogDir, RULES_DIR: copy.rulesDir });
      assert.equal(bad.code, 1);
      assert.deepEqual(JSON.parse(bad.stdout), {
        ok: false,
        diagnostics: [
          { file, line: lineOf(text, 'per_hour_atomic'), column: 20, code: 'type', message: 'must be string' },
        ],
      });
    } finally {
      await writeFile(path, text);
    }
    const good = await cli(['catalog', 'check', '--json'], { CATALOG_DIR: copy.catalogDir, RULES_DIR: copy.rulesDir });
    assert.equal(good.code, 0, good.stderr);
    const document = JSON.parse(good.stdout);
    assert.equal(document.ok, true);
    assert.deepEqual(document.diagnostics, []);
    assert.match(document.content_hash, /^sha256:[0-9a-f]{64}$/);
  });
});

describe('catalog command line', () => {
  test('every catalog command has --help', async () => {
    for (const command of ['check', 'diff', 'preview']) {
      const result = await cli(['catalog', command, '--help']);
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout, new RegExp(`^usage: agent-audio catalog ${command}`));
      assert.match(result.stdout, /exit 0/);
    }
  });

  test('an unknown command is named before the usage', async () => {
    const result = await cli(['catalog', 'chekc']);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /^unknown command catalog chekc\n\nusage: agent-audio <command>/);
    const other = await cli(['frobnicate']);
    assert.equal(other.code, 2);
    assert.match(other.stderr, /^unknown command frobnicate\n/);
    const asked = await cli(['--help']);
    assert.equal(asked.code, 0);
    assert.match(asked.stdout, /^usage: agent-audio <command>/);
  });
});
