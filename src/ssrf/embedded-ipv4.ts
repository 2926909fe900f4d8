import { isIPv6 } from 'node:net';

/** An IPv4 address carried inside an IPv6 one, and the transition mechanism that carries it. */
export interface EmbeddedIpv4 {
  address: string;
  form: string;
}

/**
 * Every IPv4 address an IPv6 address may lead to: IPv4-compatible (::/96), IPv4-mapped (::ffff:0:0/96),
 * IPv4-translated (::ffff:0:0:0/96), NAT64 (64:ff9b::/96, and 64:ff9b:1::/48 at each RFC 6052 prefix length),
 * 6to4 (2002::/16) and Teredo (2001::/32: its server, and its client, stored inverted).
 */
export function embeddedIpv4(address: string): EmbeddedIpv4[] {
  if (!isIPv6(address)) return [];
  const b = ipv6Bytes(address);
  const zero = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  const v4 = (bytes: number[]) => bytes.join('.');
  const word = (i: number) => (b[i] << 8) | b[i + 1];
  const found: EmbeddedIpv4[] = [];
  if (zero(0, 10) && word(10) === 0xffff) found.push({ address: v4(b.slice(12)), form: 'IPv4-mapped' });
  else if (zero(0, 8) && word(8) === 0xffff && word(10) === 0)
    found.push({ address: v4(b.slice(12)), form: 'IPv4-translated' });
  else if (zero(0, 12) && (!zero(12, 15) || b[15] > 1))
    found.push({ address: v4(b.slice(12)), form: 'IPv4-compatible' });
  if (word(0) === 0x64 && word(2) === 0xff9b && zero(4, 12)) found.push({ address: v4(b.slice(12)), form: 'NAT64' });
  if (word(0) === 0x64 && word(2) === 0xff9b && word(4) === 1) {
    // RFC 6052: the IPv4 bits follow the prefix, skipping bits 64-71.
    for (const octets of [
      [6, 7, 9, 10],
      [7, 9, 10, 11],
      [9, 10, 11, 12],
      [12, 13, 14, 15],
    ]) {
      found.push({ address: v4(octets.map((i) => b[i])), form: 'NAT64 (local-use prefix)' });
    }
  }
  if (word(0) === 0x2002) found.push({ address: v4(b.slice(2, 6)), form: '6to4' });
  if (word(0) === 0x2001 && word(2) === 0) {
    found.push({ address: v4(b.slice(4, 8)), form: 'Teredo server' });
    found.push({ address: v4(b.slice(12).map((x) => x ^ 0xff)), form: 'Teredo client' });
  }
  return found;
}

/** The 16 bytes of a valid IPv6 address (any spelling: "::", a trailing dotted quad, a zone id). */
function ipv6Bytes(address: string): number[] {
  let text = address.split('%')[0];
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number);
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const groups = (s: string) => (s ? s.split(':') : []);
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  const words = [...left, ...Array(8 - left.length - right.length).fill('0'), ...right].map((g) => parseInt(g, 16));
  return words.flatMap((w) => [w >> 8, w & 0xff]);
}
