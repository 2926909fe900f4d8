import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { mergedTimes, readTimes, slowestFirst, TIMES_FILE, writeTimes } from '../scripts/test-order.mjs';

const files = ['test/a.test.ts', 'test/b.test.ts', 'test/c.test.ts', 'test/new.test.ts', 'test/young.test.ts'];

test('files start slowest first by their kept times; files with none start before them, by name', () => {
  const times = new Map([
    ['test/a.test.ts', 2000],
    ['test/b.test.ts', 9000],
    ['test/c.test.ts', 2000],
    ['test/gone.test.ts', 50_000],
  ]);
  assert.deepEqual(slowestFirst(files, times), [
    'test/new.test.ts',
    'test/young.test.ts',
    'test/b.test.ts',
    'test/a.test.ts',
    'test/c.test.ts',
  ]);
});

test('a run of every file keeps the mean of the kept and the measured time; a failed file keeps its time', () => {
  const previous = {
    measured: true,
    times: new Map([
      ['test/a.test.ts', 2000],
      ['test/b.test.ts', 9000],
      ['test/gone.test.ts', 1],
    ]),
  };
  const measured = new Map([
    ['test/a.test.ts', 4000],
    ['test/new.test.ts', 1234],
  ]);
  assert.deepEqual(mergedTimes(previous, measured, ['test/b.test.ts', 'test/a.test.ts', 'test/new.test.ts']), {
    'test/a.test.ts': 3000,
    'test/b.test.ts': 9000,
    'test/new.test.ts': 1200,
  });
  const seeded = { ...previous, measured: false };
  assert.equal(mergedTimes(seeded, measured, ['test/a.test.ts'])['test/a.test.ts'], 4000, 'a seeded rank is replaced');
});

test('the kept file reads back what was written; the repository has one for every test file', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'test-order-'));
  try {
    const path = join(dir, 'times.json');
    writeTimes({ 'test/a.test.ts': 2000 }, path);
    assert.deepEqual(readTimes(path), { measured: true, times: new Map([['test/a.test.ts', 2000]]) });
    assert.match(JSON.parse(await readFile(path, 'utf8')).about, /Generated: do not edit/);
    assert.deepEqual(readTimes(join(dir, 'missing.json')), { measured: false, times: new Map() });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  assert.ok(readTimes(TIMES_FILE).times.size > 50, `${TIMES_FILE} holds the times of the test files`);
});
