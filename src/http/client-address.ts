import { isIP } from 'node:net';
import type { IncomingMessage } from 'node:http';
import { plainAddress } from '../transport/index.js';

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
