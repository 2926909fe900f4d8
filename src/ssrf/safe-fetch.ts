import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { UrlPolicy } from './url-policy.js';

export class RefusedUrl extends Error {}

/**
 * GET through the policy: checked before the request, checked again on the address actually connected to
 * (a DNS answer that changed since — rebinding — is refused), and again for every redirect, followed by hand.
 */
export async function safeGet(
  url: string,
  policy: UrlPolicy,
  options: { maxRedirects?: number; timeoutMs?: number } = {},
): Promise<http.IncomingMessage> {
  let current = url;
  for (let hop = 0; hop <= (options.maxRedirects ?? 5); hop++) {
    const reason = await policy.refuse(current);
    if (reason) throw new RefusedUrl(`${current}: ${reason}`);
    const response = await connect(current, policy, options.timeoutMs ?? 10_000);
    const location = response.headers.location;
    if (response.statusCode && response.statusCode >= 300 && response.statusCode < 400 && location) {
      response.resume();
      current = new URL(location, current).href;
      continue;
    }
    return response;
  }
  throw new RefusedUrl(`${url}: too many redirects`);
}

/** A DNS lookup for http(s) requests that refuses, at connect time, an address the policy does not allow. */
export function checkedLookup(policy: UrlPolicy): LookupFunction {
  return (hostname, options, callback) => {
    policy.resolve(hostname).then(
      (addresses) => {
        const address = addresses[0];
        const reason = address === undefined ? 'no address' : policy.checkAddress(address);
        if (reason) callback(new RefusedUrl(`${hostname}: ${reason} (at connect time)`), '', 4);
        else if ((options as { all?: boolean }).all)
          (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [
            { address: address!, family: address!.includes(':') ? 6 : 4 },
          ]);
        else callback(null, address!, address!.includes(':') ? 6 : 4);
      },
      (e: Error) => callback(e as NodeJS.ErrnoException, '', 4),
    );
  };
}

function connect(url: string, policy: UrlPolicy, timeoutMs: number): Promise<http.IncomingMessage> {
  const client = url.startsWith('https:') ? https : http;
  return new Promise((resolve, reject) => {
    const request = client.get(
      url,
      { lookup: checkedLookup(policy), timeout: timeoutMs, headers: { 'user-agent': 'agent-audio-relay' } },
      resolve,
    );
    request.on('timeout', () => request.destroy(new Error(`${url}: no answer within ${timeoutMs} ms`)));
    request.on('error', reject);
  });
}
