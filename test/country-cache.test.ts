import assert from 'node:assert/strict';
import { readdir, readFile, stat, truncate, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import * as countries from '../src/stats/countries.js';
import { scratchDir } from './support/service.js';

// The country table is parsed from its CSV files once per machine and then read from a binary cache. These tests use
// small CSV files of their own in the package's format (first address, last address, country; numbers) and a cache
// folder of their own; test/stats.test.ts looks up countries in the real table.
const { CountryTable } = countries;

const V4 = ['16777216,16777471,AU', '33554432,33554687,GB', '167772160,184549375,ZZ'].join('\n');
// 2001:db8::/32 (a code of our own) and 2a00:1450::/32 (IE), sorted as the package's are
const V6 = [
  `${0x20010db8n << 96n},${(0x20010db9n << 96n) - 1n},DB`,
  `${0x2a001450n << 96n},${(0x2a001451n << 96n) - 1n},IE`,
].join('\n');

async function sources(v4 = V4, v6 = V6) {
  const dir = await scratchDir('country-sources-');
  await writeFile(join(dir, 'geo-whois-asn-country-ipv4-num.csv'), `${v4}\n`);
  await writeFile(join(dir, 'geo-whois-asn-country-ipv6-num.csv'), `${v6}\n`);
  // Whole seconds, which utimes gives back exactly (scribbleKeepingIdentity)
  const second = Math.floor(Date.now() / 1000) - 60;
  for (const name of await readdir(dir)) await utimes(join(dir, name), second, second);
  return { dir, cache: await scratchDir('country-cache-') };
}

type Table = Awaited<ReturnType<typeof CountryTable.load>>;
function answers(table: Table): (string | null)[] {
  return ['1.0.0.7', '2.0.0.200', '10.1.2.3', '192.168.1.1', '::ffff:1.0.0.9', '2a00:1450:4001::1', '2001:db8::1'].map(
    (address) => table.countryOf(address),
  );
}
const EXPECTED = ['AU', 'GB', 'ZZ', null, 'AU', 'IE', 'DB'];

/** Loads the table and says how many times the CSV files were parsed for it. */
async function load(dir: string, cache: string): Promise<{ table: Table; parses: number }> {
  const before = countries.countryParses;
  const table = await CountryTable.load(dir, cache);
  return { table, parses: countries.countryParses - before };
}

async function cacheFiles(cache: string): Promise<string[]> {
  return (await readdir(cache)).sort();
}

/** Overwrites a file with as many other bytes and gives it back its modification time: its identity is unchanged. */
async function scribbleKeepingIdentity(file: string): Promise<void> {
  const { size, mtimeMs } = await stat(file);
  await writeFile(file, Buffer.alloc(size, 'x'));
  await utimes(file, mtimeMs / 1000, mtimeMs / 1000);
}

test('the first load parses the files and keeps the table; the next one reads it and never the files', async () => {
  const { dir, cache } = await sources();
  const cold = await load(dir, cache);
  assert.equal(cold.parses, 1);
  assert.deepEqual(answers(cold.table), EXPECTED);
  assert.equal((await cacheFiles(cache)).length, 1, 'one cache file, no temporary one left');

  const warm = await load(dir, cache);
  assert.equal(warm.parses, 0);
  assert.deepEqual(answers(warm.table), EXPECTED);

  // Sources of the same size and time but unreadable as CSV: the answers can only come from the cache.
  for (const name of await readdir(dir)) await scribbleKeepingIdentity(join(dir, name));
  const fromCache = await load(dir, cache);
  assert.equal(fromCache.parses, 0);
  assert.deepEqual(answers(fromCache.table), EXPECTED);
});

test('a changed source is parsed again, and the table of the old one is removed', async () => {
  const { dir, cache } = await sources();
  await load(dir, cache);
  const [old] = await cacheFiles(cache);
  const v4 = V4.replace('AU', 'NZ').replace('\n', '\n16777472,16777727,AU\n');
  await writeFile(join(dir, 'geo-whois-asn-country-ipv4-num.csv'), `${v4}\n`);

  const changed = await load(dir, cache);
  assert.equal(changed.parses, 1);
  assert.deepEqual(answers(changed.table), ['NZ', ...EXPECTED.slice(1, 4), 'NZ', ...EXPECTED.slice(5)]);
  assert.equal(changed.table.countryOf('1.0.1.1'), 'AU');
  const now = await cacheFiles(cache);
  assert.equal(now.length, 1);
  assert.notEqual(now[0], old);
  assert.equal((await load(dir, cache)).parses, 0);
});

test('a cut or scribbled cache file is ignored: the files are parsed again and the cache written whole', async () => {
  const { dir, cache } = await sources();
  await load(dir, cache);
  const file = join(cache, (await cacheFiles(cache))[0]);
  const whole = await readFile(file);

  await truncate(file, whole.length - 5);
  const afterCut = await load(dir, cache);
  assert.equal(afterCut.parses, 1);
  assert.deepEqual(answers(afterCut.table), EXPECTED);
  assert.deepEqual(await readFile(file), whole);

  // The same length, one range's country changed: only the digest tells.
  const scribbled = Buffer.from(whole);
  scribbled[scribbled.length - 20] ^= 1;
  await writeFile(file, scribbled);
  const afterScribble = await load(dir, cache);
  assert.equal(afterScribble.parses, 1);
  assert.deepEqual(answers(afterScribble.table), EXPECTED);
  assert.deepEqual(await readFile(file), whole);

  await writeFile(file, 'not a table');
  assert.equal((await load(dir, cache)).parses, 1);
  assert.equal((await load(dir, cache)).parses, 0);
});

test('loads started together each write the cache whole, and leave one file and no temporary ones', async () => {
  const { dir, cache } = await sources();
  const tables = await Promise.all([1, 2, 3, 4].map(() => load(dir, cache)));
  for (const { table } of tables) assert.deepEqual(answers(table), EXPECTED);
  assert.equal((await cacheFiles(cache)).length, 1);
  assert.equal((await load(dir, cache)).parses, 0);
});

test('an unwritable cache folder costs only the parse', async () => {
  const { dir, cache } = await sources();
  const blocker = join(cache, 'file');
  await writeFile(blocker, '');
  const first = await load(dir, join(blocker, 'countries'));
  assert.deepEqual(answers(first.table), EXPECTED);
  assert.equal((await load(dir, join(blocker, 'countries'))).parses, 1);
});
