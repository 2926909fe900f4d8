import { isIP } from 'node:net';
import type { IncomingMessage } from 'node:http';

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

/**
 * The address a request's limits are counted against. Behind reverse proxies (TRUSTED_PROXIES): a request that comes
 * from one of them has its client address taken from X-Forwarded-For, the rightmost address that no trusted proxy
 * added (the ones to its left are the client's word). From any other peer the header is ignored, so a client cannot
 * choose the address its limits are counted against.
 */
export function clientAddress(trusted: ReadonlySet<string> = new Set()) {
  return function addressOf(req: IncomingMessage): string {
    const remote = req.socket.remoteAddress ?? '';
    const peer = plainAddress(remote);
    if (!peer || !trusted.has(peer)) return remote;
    const forwarded = req.headers['x-forwarded-for'];
    const hops = (Array.isArray(forwarded) ? forwarded.join(',') : (forwarded ?? ''))
      .split(',')
      .map((hop) => plainAddress(hop.trim())!)
      .filter((hop) => isIP(hop) !== 0);
    let client = peer;
    for (let i = hops.length - 1; i >= 0 && trusted.has(client); i--) client = hops[i];
    return client;
  };
}
