import { isIP } from 'node:net';
import { absoluteUrl, hostOf, nonPublicAddress, publicHttpOnly, type UrlPolicy } from '../ssrf/index.js';

export interface WebhookUrlPolicy extends UrlPolicy {
  /** Why this URL may not receive webhooks, or undefined: https (see insecureLoopback), public addresses only. */
  refuse(url: string): Promise<string | undefined>;
}

function isLoopback(address: string): boolean {
  return isIP(address) === 4 ? address.startsWith('127.') : address === '::1';
}

/**
 * https only, and the relay's SSRF policy (src/ssrf): no credentials, every address public, checked again when
 * connecting. `insecureLoopback` (WEBHOOK_ALLOW_INSECURE_LOOPBACK=1, tests and development only, refused in
 * production) lets http reach loopback receivers and nothing else.
 */
export function webhookUrlPolicy(
  options: { insecureLoopback?: boolean; resolve?: UrlPolicy['resolve'] } = {},
): WebhookUrlPolicy {
  const loopbackAllowed = options.insecureLoopback === true;
  const base = publicHttpOnly({
    ...(options.resolve && { resolve: options.resolve }),
    checkAddress: (address) => (loopbackAllowed && isLoopback(address) ? undefined : nonPublicAddress(address)),
  });
  return {
    ...base,
    async refuse(text) {
      const url = absoluteUrl(text);
      if (typeof url === 'string') return url;
      if (url.protocol !== 'https:') {
        const host = hostOf(url);
        const loopbackHttp =
          loopbackAllowed &&
          url.protocol === 'http:' &&
          (host === 'localhost' || (isIP(host) !== 0 && isLoopback(host)));
        if (!loopbackHttp) return `webhook URLs must use https, not ${url.protocol.replace(':', '')}`;
      }
      if (url.hash) return 'webhook URLs may not have a fragment';
      return base.refuse(text);
    },
  };
}
