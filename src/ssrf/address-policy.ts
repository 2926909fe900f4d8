import { BlockList, isIP } from 'node:net';
import { embeddedIpv4 } from './embedded-ipv4.js';

/**
 * Addresses a relay must never connect to: everything that is not the public internet. Two lists: a BlockList also
 * matches IPv4 addresses against IPv6 rules through their mapped form.
 */
const forbiddenV4 = new BlockList();
const forbiddenV6 = new BlockList();
const mappedV4 = new BlockList();
mappedV4.addSubnet('::ffff:0:0', 96, 'ipv6');
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
  ['255.255.255.255', 32],
] as const)
  forbiddenV4.addSubnet(network, prefix, 'ipv4');
for (const [network, prefix] of [
  ['::', 8],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001::', 23],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const)
  forbiddenV6.addSubnet(network, prefix, 'ipv6');

/**
 * Why this IP address is not a public one, or undefined when it is public. IPv6 forms that embed an IPv4 address are
 * refused when that address is not public; IPv4-mapped, the rest of ::/8 and the transition prefixes are refused anyway.
 */
export function nonPublicAddress(address: string): string | undefined {
  const family = isIP(address);
  if (family === 0) return `${address} is not an IP address`;
  // An IPv6 form that carries an IPv4 address leads there: judge it by that address first.
  for (const embedded of embeddedIpv4(address)) {
    const reason =
      forbiddenV4.check(embedded.address, 'ipv4') &&
      `${address} embeds the IPv4 address ${embedded.address} (${embedded.form}), which is not a public address`;
    if (reason) return reason;
  }
  // Either spelling (::ffff:127.0.0.1 or ::ffff:7f00:1, as URLs normalise it).
  if (family === 6 && mappedV4.check(address, 'ipv6')) return `${address} is an IPv4-mapped address`;
  if (family === 4 ? forbiddenV4.check(address, 'ipv4') : forbiddenV6.check(address, 'ipv6'))
    return `${address} is not a public address (loopback, private, link-local, CGNAT, multicast, metadata or reserved)`;
  return undefined;
}
