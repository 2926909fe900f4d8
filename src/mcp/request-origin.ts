import { isIP } from 'node:net';

export interface OriginSettings {
  /** The API's public address, …/api/v1 (PUBLIC_BASE_URL, or the listen address). */
  publicBaseUrl: () => string;
  /** Where HTTP listens (HOST); a wildcard address names no host. */
  listenHost?: string;
  /** Browser origins allowed besides (MCP_ALLOWED_ORIGINS), as scheme://host[:port]. */
  allowedOrigins?: readonly string[];
}

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1'];

/**
 * DNS rebinding protection of the MCP endpoint (MCP Streamable HTTP transport: servers must validate Origin). A page
 * on a foreign site whose name was made to resolve to this server reaches it with that name in Host and the site in
 * Origin: both must name this service (its public host, its listen host, loopback) or, for Origin, an origin the
 * operator allowed. A Host that is an IP address cannot have been rebound (no name was resolved), and a request with
 * no Origin does not come from a browser's page: agents keep calling without one.
 */
export class RequestOrigins {
  private readonly configured: ReadonlySet<string>;
  /** The allowed origins' host names: a deployment also reached under such a name receives it as Host. */
  private readonly configuredNames: ReadonlySet<string>;

  constructor(private readonly settings: OriginSettings) {
    this.configured = new Set(settings.allowedOrigins ?? []);
    const names = [...this.configured].map(hostnameOf);
    this.configuredNames = new Set(names.filter((name): name is string => name !== undefined));
  }

  /** Why a request with these Host and Origin headers is refused, or undefined when it is allowed. */
  refusal(host: string | undefined, origin: string | undefined): string | undefined {
    if (host && !this.hostAllowed(host)) {
      return (
        `Host ${JSON.stringify(host.slice(0, 200))} is not an address of this service (DNS rebinding ` +
        `protection): call the MCP endpoint at ${this.settings.publicBaseUrl()}/mcp.`
      );
    }
    if (origin !== undefined && !this.originAllowed(origin, host)) {
      return (
        `Origin ${JSON.stringify(origin.slice(0, 200))} may not call this MCP endpoint (DNS rebinding ` +
        "protection): a browser page must come from this service's own address or an origin the operator lists in " +
        'MCP_ALLOWED_ORIGINS. Agents outside a browser send no Origin header.'
      );
    }
    return undefined;
  }

  private hostAllowed(host: string): boolean {
    const name = hostnameOf(`http://${host}`);
    return name !== undefined && (isIP(name) !== 0 || this.serviceNames().has(name) || this.configuredNames.has(name));
  }

  private originAllowed(origin: string, host: string | undefined): boolean {
    if (this.configured.has(origin)) return true;
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      return false;
    }
    if (!/^https?:$/.test(url.protocol)) return false;
    // The page was served from the address the request came to: a same-origin call, allowed when its Host is.
    if (host && url.host === host.toLowerCase()) return this.hostAllowed(host);
    return this.serviceNames().has(bare(url.hostname));
  }

  /** Host names this service answers to: loopback, the listen host, the public host. */
  private serviceNames(): Set<string> {
    const names = new Set(LOOPBACK_NAMES);
    const listen = this.settings.listenHost?.toLowerCase();
    if (listen && listen !== '0.0.0.0' && listen !== '::') names.add(bare(listen));
    const publicHost = hostnameOf(this.settings.publicBaseUrl());
    if (publicHost) names.add(publicHost);
    return names;
  }
}

function hostnameOf(url: string): string | undefined {
  try {
    return bare(new URL(url).hostname);
  } catch {
    return undefined;
  }
}

/** An IPv6 host name without its brackets, lower case. */
function bare(hostname: string): string {
  return hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
}
