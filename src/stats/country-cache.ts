import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { endianness } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Ranges as numbers, each end exclusive (the written end + 1). */
export interface Ranges {
  starts: Float64Array;
  ends: Float64Array;
  codes: Uint16Array;
}

/** The parsed country table: both families' ranges and the country codes their `codes` index. */
export interface CountryData {
  v4: Ranges;
  v6: Ranges;
  names: string[];
}

/** Where the parsed table is kept: beside the other tools' caches, shared by every process of this checkout. */
export const defaultCountryCache = fileURLToPath(
  new URL('../../node_modules/.cache/agent-audio/countries/', import.meta.url),
);

// The layout's version: a change of layout must change it, so that older files are never read as the new one.
const MAGIC = Buffer.from('AACNTRY3', 'latin1');
// The magic, the IPv4 and IPv6 range counts and the number of codes (u32 LE), then the SHA-1 of the rest: 40 bytes, so
// the float64 arrays after it lie aligned.
const COUNTS = MAGIC.length;
const DIGEST = COUNTS + 12;
const HEADER = DIGEST + 20;
const PREFIX = 'countries-';

/**
 * The cache file for these source files: named by their identity (path, size, modification time) and the layout, so a
 * new or touched source is parsed again, and the typed arrays' byte order, so the file is only read where it was made.
 */
export async function countryCacheFile(sources: string[], cacheDir: string): Promise<string> {
  const hash = createHash('sha256').update(`${MAGIC}\0${endianness()}\0`);
  for (const source of sources) {
    const { size, mtimeMs } = await stat(source);
    hash.update(`${resolve(source)}\0${size}\0${mtimeMs}\0`);
  }
  return join(cacheDir, `${PREFIX}${hash.digest('hex').slice(0, 32)}.bin`);
}

/** The table kept in `file`, or undefined when there is none or it is not whole (then the sources are parsed again). */
export async function readCountryCache(file: string): Promise<CountryData | undefined> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch {
    return undefined;
  }
  return decode(bytes);
}

/**
 * Keeps the table in `file`, whole or not at all: written beside it under a name of this process's own, then renamed,
 * so a process starting at the same time reads either nothing or a complete file, whoever renames last. Other tables
 * in the folder (of sources since replaced) are removed. A folder that cannot be written costs only the parse.
 */
export async function writeCountryCache(file: string, data: CountryData): Promise<void> {
  const temporary = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}`;
  try {
    await mkdir(join(file, '..'), { recursive: true });
    await writeFile(temporary, encode(data));
    await rename(temporary, file);
    await removeOthers(file);
  } catch {
    await rm(temporary, { force: true }).catch(() => undefined);
  }
}

async function removeOthers(file: string): Promise<void> {
  const folder = join(file, '..');
  for (const name of await readdir(folder)) {
    if (name.startsWith(PREFIX) && name.endsWith('.bin') && name !== basename(file)) {
      await rm(join(folder, name), { force: true });
    }
  }
}

// Layout after the header, each part's length known from the counts: IPv4 starts and ends, IPv6 starts and ends
// (float64), IPv4 codes and IPv6 codes (uint16), then the two-letter codes (latin1). The arrays are read in place.
function encode({ v4, v6, names }: CountryData): Buffer {
  const parts = [v4.starts, v4.ends, v6.starts, v6.ends, v4.codes, v6.codes];
  const arrays = parts.map((array) => Buffer.from(array.buffer, array.byteOffset, array.byteLength));
  const body = Buffer.concat([...arrays, Buffer.from(names.join(''), 'latin1')]);
  const header = Buffer.alloc(HEADER);
  MAGIC.copy(header);
  header.writeUInt32LE(v4.starts.length, COUNTS);
  header.writeUInt32LE(v6.starts.length, COUNTS + 4);
  header.writeUInt32LE(names.length, COUNTS + 8);
  digest(body).copy(header, DIGEST);
  return Buffer.concat([header, body]);
}

// A digest rather than a check of each range: hashing 10 MB natively costs about 15 ms, while a loop over half a
// million ranges costs a test process (whose optimizing compiler is off) a quarter of a second.
function digest(body: Buffer): Buffer {
  return createHash('sha1').update(body).digest();
}

function decode(bytes: Buffer): CountryData | undefined {
  if (bytes.length < HEADER || !bytes.subarray(0, MAGIC.length).equals(MAGIC)) return undefined;
  const n4 = bytes.readUInt32LE(COUNTS);
  const n6 = bytes.readUInt32LE(COUNTS + 4);
  const count = bytes.readUInt32LE(COUNTS + 8);
  if (bytes.length !== HEADER + 18 * (n4 + n6) + 2 * count) return undefined;
  if (!digest(bytes.subarray(HEADER)).equals(bytes.subarray(DIGEST, HEADER))) return undefined;
  // The float64 views need an aligned offset: a buffer that does not give one is copied to one of its own.
  const aligned = bytes.byteOffset % 8 === 0 ? bytes : Buffer.from(new Uint8Array(bytes));
  let at = aligned.byteOffset + HEADER;
  const floats = (n: number) => new Float64Array(aligned.buffer, (at += 8 * n) - 8 * n, n);
  const shorts = (n: number) => new Uint16Array(aligned.buffer, (at += 2 * n) - 2 * n, n);
  const [s4, e4, s6, e6] = [floats(n4), floats(n4), floats(n6), floats(n6)];
  const v4 = { starts: s4, ends: e4, codes: shorts(n4) };
  const v6 = { starts: s6, ends: e6, codes: shorts(n6) };
  const text = bytes.toString('latin1', bytes.length - 2 * count);
  return { v4, v6, names: Array.from({ length: count }, (_, i) => text.slice(2 * i, 2 * i + 2)) };
}
