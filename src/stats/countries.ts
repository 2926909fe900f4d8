import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { isIPv4, isIPv6 } from 'node:net';
import {
  type CountryData,
  countryCacheFile,
  defaultCountryCache,
  type Ranges,
  readCountryCache,
  writeCountryCache,
} from './country-cache.js';

/**
 * Country of an address from the IP ranges of @ip-location-db/geo-whois-asn-country (the five regional registries'
 * whois data and published geofeeds, CC BY 4.0 by the NRO): inclusive ranges, sorted, looked up by binary search.
 * Numbers are kept as doubles: exact for IPv4; for IPv6 their upper 53 bits, exact for a /48, and a listener is looked
 * up by its /48 network. Ends are kept exclusive (end + 1): a rounded IPv6 end is then the next range's start.
 */
export class CountryTable {
  private constructor(
    private readonly v4: Ranges,
    private readonly v6: Ranges,
    private readonly names: string[],
  ) {}

  /**
   * The table of the CSV files in `directory`: parsed once per machine and kept in `cacheDir` (about 10 MB), which later
   * processes read in milliseconds instead of parsing 25 MB for a second or more while the first listener waits.
   */
  static async load(directory = packageDirectory(), cacheDir = defaultCountryCache): Promise<CountryTable> {
    const sources = SOURCES.map((name) => join(directory, name));
    const file = await countryCacheFile(sources, cacheDir);
    let data = await readCountryCache(file);
    if (!data) {
      data = await parseSources(sources);
      await writeCountryCache(file, data);
    }
    return new CountryTable(data.v4, data.v6, data.names);
  }

  /**
   * The ISO 3166-1 alpha-2 code of the address's network (only its /24 or /48 is read), or null (private, reserved or
   * not in the table).
   */
  countryOf(address: string): string | null {
    const plain = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1] ?? address;
    if (isIPv4(plain)) {
      const [a, b, c] = plain.split('.').map(Number);
      return this.find(this.v4, ((a << 24) >>> 0) + (b << 16) + (c << 8));
    }
    if (isIPv6(plain)) return this.find(this.v6, ipv6Network48(plain));
    return null;
  }

  private find(table: Ranges, value: number): string | null {
    let low = 0;
    let high = table.starts.length - 1;
    while (low <= high) {
      const mid = (low + high) >>> 1;
      if (table.starts[mid] > value) high = mid - 1;
      else if (table.ends[mid] <= value) low = mid + 1;
      else return this.names[table.codes[mid]];
    }
    return null;
  }
}

const SOURCES = ['geo-whois-asn-country-ipv4-num.csv', 'geo-whois-asn-country-ipv6-num.csv'];

/** How many times this process parsed the CSV files (tests check that a cached table is not parsed again). */
export let countryParses = 0;

async function parseSources([v4File, v6File]: string[]): Promise<CountryData> {
  countryParses += 1;
  const names: string[] = [];
  const index = new Map<string, number>();
  const codeOf = (code: string) => {
    let i = index.get(code);
    if (i === undefined) index.set(code, (i = names.push(code) - 1));
    return i;
  };
  const v4 = await readRanges(v4File, codeOf);
  const v6 = await readRanges(v6File, codeOf);
  return { v4, v6, names };
}

// Parsed in slices with a turn of the event loop between them: the files are 25 MB, and a host parsing them in one
// go stopped admitting and relaying for a second or two.
const SLICE = 20_000;

async function readRanges(file: string, codeOf: (code: string) => number): Promise<Ranges> {
  const lines = (await readFile(file, 'latin1')).split('\n');
  const starts = new Float64Array(lines.length);
  const ends = new Float64Array(lines.length);
  const codes = new Uint16Array(lines.length);
  let n = 0;
  for (let i = 0; i < lines.length; i++) {
    if (i % SLICE === SLICE - 1) await new Promise((resolve) => setImmediate(resolve));
    const line = lines[i];
    const a = line.indexOf(',');
    const b = line.indexOf(',', a + 1);
    if (a < 0 || b < 0 || line.length - b !== 3) continue;
    starts[n] = Number(line.slice(0, a));
    ends[n] = Number(line.slice(a + 1, b)) + 1;
    codes[n++] = codeOf(line.slice(b + 1));
  }
  return { starts: starts.slice(0, n), ends: ends.slice(0, n), codes: codes.slice(0, n) };
}

/** The address's /48 network as a number (exact in a double: 48 significant bits). */
function ipv6Network48(address: string): number {
  const [head, tail = ''] = address.split('%')[0].split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = address.includes('::')
    ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right]
    : left;
  const top48 = groups.slice(0, 3).reduce((n, g) => n * 65536 + (Number.parseInt(g || '0', 16) || 0), 0);
  return top48 * 2 ** 80;
}

function packageDirectory(): string {
  const require = createRequire(import.meta.url);
  return dirname(require.resolve('@ip-location-db/geo-whois-asn-country/package.json'));
}

let shared: Promise<CountryTable> | undefined;
/** The table, read on first use (from the cache, or parsed in slices the first time on a machine) and kept. */
export function countries(): Promise<CountryTable> {
  shared ??= CountryTable.load();
  return shared;
}
