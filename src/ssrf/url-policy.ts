import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { nonPublicAddress } from './address-policy.js';

export type Resolver = (hostname: string) => Promise<string[]>;
export type AddressCheck = (address: string) => string | undefined;

const systemResolver: Resolver = async (hostname) =>
  (await lookup(hostname, { all: true, verbatim: true })).map((a) => a.address);

export interface UrlPolicy {
  /** Why this URL may not be fetched, or undefined. Resolves the host: every address must pass. */
  refuse(url: string): Promise<string | undefined>;
  /** The address check alone, for the moment of connecting (DNS may have changed since). */
  checkAddress: AddressCheck;
  resolve: Resolver;
}

/** The URL, or why the text is not an absolute URL. */
export function absoluteUrl(text: string): URL | string {
  try {
    return new URL(text);
  } catch {
    return 'it is not an absolute URL';
  }
}

/** The URL's host name, an IPv6 address without its brackets. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '');
}

/** The policy the catalog names public_http_https_only: http or https, no credentials, only public addresses. */
export function publicHttpOnly(options: { resolve?: Resolver; checkAddress?: AddressCheck } = {}): UrlPolicy {
  const resolve = options.resolve ?? systemResolver;
  const checkAddress = options.checkAddress ?? nonPublicAddress;
  return {
    resolve,
    checkAddress,
    async refuse(text) {
      const url = absoluteUrl(text);
      if (typeof url === 'string') return url;
      if (url.protocol !== 'http:' && url.protocol !== 'https:')
        return `only http and https URLs are allowed, not ${url.protocol.replace(':', '')}`;
      if (url.username || url.password) return 'URLs with credentials are not allowed';
      const host = hostOf(url);
      let addresses: string[];
      try {
        addresses = isIP(host) ? [host] : await resolve(host);
      } catch {
        return `the host ${host} does not resolve`;
      }
      if (!addresses.length) return `the host ${host} does not resolve`;
      for (const address of addresses) {
        const reason = checkAddress(address);
        if (reason) return `${host} resolves to ${reason}`;
      }
      return undefined;
    },
  };
}

let standIns = new Set<string>();

/**
 * Tests only (SSRF_TEST_PUBLIC_ADDRESSES, refused in production by the configuration): this machine has no public
 * network, so a test names addresses to treat as public, e.g. 127.0.0.2 for a stand-in upstream.
 */
export function treatAsPublic(addresses: string[]): void {
  standIns = new Set(addresses);
}

/** Policies by the name a product's fulfillment gives. */
export const policies: Record<string, () => UrlPolicy> = {
  public_http_https_only: () =>
    publicHttpOnly(standIns.size ? { checkAddress: (a) => (standIns.has(a) ? undefined : nonPublicAddress(a)) } : {}),
};

/** Problems with a product's url parameters under the policy its fulfillment names (ssrf_protection), one per parameter. */
export async function refusedUrlParameters(
  product: { parameters: Record<string, { type: string }>; fulfillment?: Record<string, unknown> },
  configuration: Record<string, unknown>,
  choose: (name: string) => UrlPolicy | undefined = (name) => policies[name]?.(),
): Promise<{ pointer: string; code: string; message: string }[]> {
  const name = product.fulfillment?.ssrf_protection;
  const urls = Object.entries(product.parameters)
    .filter(([, d]) => d.type === 'url')
    .map(([p]) => p)
    .filter((p) => typeof configuration[p] === 'string');
  if (!urls.length) return [];
  const policy = typeof name === 'string' ? choose(name) : undefined;
  if (!policy)
    return urls.map((p) => ({
      pointer: `/parameters/${p}`,
      code: 'url_not_allowed',
      message: `no URL policy ${String(name)} is known, so no URL is accepted`,
    }));
  const problems = [];
  for (const p of urls) {
    const reason = await policy.refuse(configuration[p] as string);
    if (reason)
      problems.push({
        pointer: `/parameters/${p}`,
        code: 'url_not_allowed',
        message: `${p} is not allowed: ${reason}`,
      });
  }
  return problems;
}
