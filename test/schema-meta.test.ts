import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { createAjv } from '../src/schema/ajv.js';
import { cachedSchemas } from '../src/schema/validator-cache.js';
import { root } from './support/service.js';

/**
 * The service compiles its schemas without checking them against the JSON Schema meta-schema (src/schema/ajv.ts: that
 * check cost every process about 0.1 s of CPU per Ajv). Here every schema the service compiles when it loads its
 * modules, opens the shipped catalog or keeps compiled (src/schema/validator-cache.ts) is recorded and checked against the 2020-12 meta-schema.
 */
test('every schema the service compiles is valid against the JSON Schema 2020-12 meta-schema', async () => {
  const compiled: object[] = [];
  const compile = Ajv2020.prototype.compile;
  Ajv2020.prototype.compile = function (this: Ajv2020, schema: object, meta?: boolean) {
    compiled.push(schema);
    return compile.call(this, schema, meta);
  } as typeof compile;
  try {
    await import('../src/http/index.js');
    await import('../src/mcp/index.js');
    await import('../src/payments/index.js');
    const { openSnapshot, readSnapshotFiles } = await import('../src/pricing/index.js');
    const { snapshot } = await openSnapshot(readSnapshotFiles(join(root, 'catalog'), join(root, 'rules')));
    assert.ok(snapshot, 'the shipped catalog opens');
    const { quoteRequestSchema, orderRequestSchema } = await import('../src/http/schemas.js');
    const { productFileSchema, catalogFileSchema } = await import('../src/catalog/schemas.js');
    const { ruleDocumentSchema } = await import('../src/rules/schema.js');
    // The service's own schemas are compiled on first use, or loaded already compiled (src/schema/validator-cache.ts):
    // each is compiled here, strictly, and recorded.
    for (const schema of cachedSchemas()) createAjv().compile(schema);
    for (const schema of [
      quoteRequestSchema,
      orderRequestSchema,
      productFileSchema,
      catalogFileSchema,
      ruleDocumentSchema,
    ])
      assert.ok(compiled.includes(schema), `${JSON.stringify(schema).slice(0, 60)}… is among those recorded`);
  } finally {
    Ajv2020.prototype.compile = compile;
  }
  const checker = new Ajv2020({ strict: true, allErrors: true });
  const invalid = compiled.filter((schema) => !checker.validateSchema(schema));
  assert.ok(compiled.length >= 20, `only ${compiled.length} schemas were recorded`);
  assert.deepEqual(
    invalid.map((s) => `${JSON.stringify(s).slice(0, 80)}: ${checker.errorsText(checker.errors)}`),
    [],
  );
});
