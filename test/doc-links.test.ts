import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';

// Every relative link of README.md and docs/ leads to a file, and its #anchor to a heading of that file.

/** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N}_\- ]/gu, '')
    .replace(/ /g, '-');
}

/** The text of a Markdown file without its fenced blocks and inline code, where a link is not a link. */
function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** The anchors a Markdown file's headings give, the second of a name with `-1` as GitHub numbers them. */
function anchorsOf(file: string): Set<string> {
  const anchors = new Set<string>();
  const text = readFileSync(file, 'utf8').replace(/^```[\s\S]*?^```/gm, '');
  for (const match of text.matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(match[1]);
    let anchor = base;
    for (let n = 1; anchors.has(anchor); n++) anchor = `${base}-${n}`;
    anchors.add(anchor);
  }
  return anchors;
}

/** Every relative link of `files` that leads nowhere, as `file: target (why)`. */
function brokenLinks(files: string[]): string[] {
  return files.flatMap((file) =>
    [...prose(readFileSync(file, 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)].flatMap(([, target]) => {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return [];
      const [path, anchor] = target.split('#', 2);
      const linked = path ? join(dirname(file), path) : file;
      if (!existsSync(linked)) return [`${file}: ${target} (no such file)`];
      if (anchor === undefined || !linked.endsWith('.md')) return [];
      return anchorsOf(linked).has(anchor) ? [] : [`${file}: ${target} (no such heading)`];
    }),
  );
}

const documents = [
  'README.md',
  ...readdirSync('docs').flatMap((name) => (name.endsWith('.md') ? [`docs/${name}`] : [])),
];

/** The files below `dir` (recursively) whose names end with one of `endings`. */
function filesBelow(dir: string, endings: string[]): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true }).flatMap((entry) =>
    entry.isFile() && endings.some((ending) => entry.name.endsWith(ending)) ? [join(entry.parentPath, entry.name)] : [],
  );
}

/** Where `files` name a document of this repository (`docs/name.md`) that is not there, as `file: docs/name.md`. */
function missingDocuments(files: string[]): string[] {
  return files.flatMap((file) =>
    [...new Set(readFileSync(file, 'utf8').match(/\bdocs\/[a-z0-9-]+\.md\b/g) ?? [])].flatMap((named) =>
      existsSync(named) ? [] : [`${file}: ${named}`],
    ),
  );
}

describe('links of the documents', () => {
  test('every relative link of README.md and docs/*.md resolves to a file, and its anchor to a heading', () => {
    assert.deepEqual(brokenLinks(documents), []);
  });

  test('every docs/NAME.md that the code, tests, scripts and documents name is there', () => {
    const named = [
      ...documents,
      ...['src', 'test', 'scripts', 'bench'].flatMap((dir) => filesBelow(dir, ['.ts', '.mjs'])),
    ].filter((file) => file !== join('test', 'doc-links.test.ts'));
    assert.deepEqual(missingDocuments(named), []);
  });

  test('the check finds a missing file and a missing heading, and passes code and headings GitHub numbers', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'doc-links-'));
    try {
      const page = join(folder, 'page.md');
      await writeFile(
        page,
        [
          '# Payment (x402 v2)',
          '## Payment (x402 v2)',
          '[a](#payment-x402-v2) [b](#payment-x402-v2-1) [c](page.md#payment-x402-v2) `[d](gone.md)`',
          '[e](gone.md) [f](#nowhere) [g](https://example.com/x.md)',
          '```',
          '[h](also-gone.md)',
          '```',
        ].join('\n'),
      );
      assert.deepEqual(brokenLinks([page]), [`${page}: gone.md (no such file)`, `${page}: #nowhere (no such heading)`]);
      const source = join(folder, 'source.ts');
      await writeFile(source, '// see docs/api.md and docs/gone-away.md\n');
      assert.deepEqual(missingDocuments([source]), [`${source}: docs/gone-away.md`]);
    } finally {
      await rm(folder, { recursive: true, force: true });
    }
  });
});
