import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { root } from './support/service.js';

// MCP is a transport beside HTTP, not built on it: what both need (JSON bodies, limit keys) lives in src/transport/.

/** Every `import … from '…'` statement of a source file (type-only imports included, marked). */
function importsOf(source: string): Array<{ from: string; typeOnly: boolean }> {
  const statements = source.matchAll(/^import\s+(type\s+)?[^;]*?from\s+'([^']+)';/gms);
  return [...statements].map((m) => ({ from: m[2], typeOnly: Boolean(m[1]) }));
}

test('src/mcp/ takes no value imports from src/http/', async () => {
  const folder = join(root, 'src', 'mcp');
  const offenders: string[] = [];
  for (const name of await readdir(folder, { recursive: true })) {
    if (!name.endsWith('.ts')) continue;
    const source = await readFile(join(folder, name), 'utf8');
    for (const { from, typeOnly } of importsOf(source)) {
      if (!typeOnly && /(^|\/)http\//.test(from)) offenders.push(`${name}: ${from}`);
    }
  }
  assert.deepEqual(offenders, []);
});

test('the import reader sees a value import from http/ (the check above can fail)', () => {
  const found = importsOf("import { readJson } from '../http/index.js';\nimport type { X } from '../http/x.js';\n");
  assert.deepEqual(found, [
    { from: '../http/index.js', typeOnly: false },
    { from: '../http/x.js', typeOnly: true },
  ]);
});
