import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';

// Rules of the code base that no type check sees, checked by reading the files.

function filesBelow(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'migrations' ? [] : filesBelow(path);
    return [path];
  });
}

const sources = filesBelow('src').filter((path) => path.endsWith('.ts'));
const documents = ['README.md', ...filesBelow('docs').filter((path) => path.endsWith('.md'))];

/** The lines of `files` that `pattern` finds, as `file:line: text`; `part` picks what of a line is looked at. */
function linesMatching(files: string[], pattern: RegExp, part: (line: string) => string = (line) => line): string[] {
  return files.flatMap((file) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .flatMap((line, i) => (pattern.test(part(line)) ? [`${file}:${i + 1}: ${line.trim()}`] : [])),
  );
}

/** The comment on a line of TypeScript (after `//`, or a line of a block comment), else nothing. */
function commentOf(line: string): string {
  const block = /^\s*(\/\*\*?|\*)(.*)$/.exec(line);
  if (block) return block[2];
  const slashes = line.indexOf('// ');
  return slashes >= 0 ? line.slice(slashes) : '';
}

function codeShape(folder?: string): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile('node', ['scripts/code-shape.mjs', ...(folder ? [folder] : [])], (error, stdout) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout }),
    );
  });
}

describe('the shape of src/', () => {
  test('no function over 80 lines, no constructor of more than 4 positional parameters, at most 1 % long lines', async () => {
    const shape = await codeShape();
    assert.equal(shape.code, 0, shape.stdout);
    assert.match(shape.stdout, /^\d+ files, \d+ lines, \d+ over 120 characters \(\d\.\d\d %, at most 1 %\)\n$/);
  });

  test('the check finds a function of 81 lines and a constructor of 5 positional parameters', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'code-shape-'));
    try {
      const body = Array.from({ length: 79 }, (_, i) => `  const v${i} = ${i};`).join('\n');
      await writeFile(join(folder, 'long.ts'), `export function long() {\n${body}\n}\n`);
      await writeFile(join(folder, 'wide.ts'), 'export class Wide {\n  constructor(a, b, c, d, e) {}\n}\n');
      const shape = await codeShape(folder);
      assert.equal(shape.code, 1, shape.stdout);
      assert.match(shape.stdout, /long\.ts:1 long: 81 lines/);
      assert.match(shape.stdout, /wide\.ts:2 Wide\.constructor: 5 positional parameters/);
    } finally {
      await rm(folder, { recursive: true, force: true });
    }
  });
});

describe('what the code does not say', () => {
  test('no issue numbers in code comments or documents: they mean nothing to a reader of the repository', () => {
    const issue = /\bissues? #?\d+\b|(?<![&\w])#\d{1,5}\b/i;
    assert.deepEqual(linesMatching(sources, issue, commentOf), []);
    assert.deepEqual(linesMatching(documents, issue), []);
  });

  test('no code branches on a product id: what a product does comes from its limits and parameters', () => {
    const branch = /product_?[iI]d\s*[!=]==?\s*['"`]|['"`][a-z0-9-]+['"`]\s*[!=]==?\s*[\w.]*product_?[iI]d\b/;
    assert.deepEqual(linesMatching(sources, branch), []);
  });

  test("orders/ reads a payment's scheme-neutral fields; only its store spells the columns named after EIP-3009", () => {
    const orders = sources.filter((path) => path.startsWith(join('src', 'orders')));
    const eip3009 = /\bvalid(Before|After)\b|\bvalid_(before|after)\b|\bnonce\b|\bauthorization\.(from|to|value)\b/;
    const spelling = linesMatching(orders, eip3009).map((line) => line.split(':')[0]);
    assert.deepEqual([...new Set(spelling)], [join('src', 'orders', 'order-store.ts')]);
  });
});
