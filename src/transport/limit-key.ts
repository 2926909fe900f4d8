import { isIP } from 'node:net';

/** 203.0.113.5 for ::ffff:203.0.113.5 (an IPv4 client on a dual-stack socket). */
export function plainAddress(address: string | undefined): string | undefined {
  return address?.startsWith('::ffff:') ? address.slice(7) : address;
}

/**
 * What a client's limits are counted against: an IPv4 address as is, an IPv6 address by its /64 network (the first
 * four groups). One IPv6 subscriber, or one cloud host, usually holds a whole /64, so counting single addresses would
 * give it 2^64 separate budgets.
 */
export function limitKey(address: string): string {
  const plain = plainAddress(address) ?? '';
  if (isIP(plain) !== 6) return plain;
  const [head, tail = ''] = plain.split('%')[0].split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  if (right.length && right[right.length - 1].includes('.')) right.splice(-1, 1, '0', '0');
  const groups = plain.includes('::') ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right] : left;
  return `${groups
    .slice(0, 4)
    .map((group) => parseInt(group || '0', 16).toString(16))
    .join(':')}::/64`;
}
