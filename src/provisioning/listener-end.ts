/**
 * One listener connection as HAProxy saw it end: the bytes it sent to the listener (`%B`). Icecast's access log counts
 * what Icecast wrote to HAProxy, which includes what HAProxy still held (tens of KB) when the listener left; HAProxy's
 * figure stops at what it wrote to the listener's own socket.
 */
export interface ListenerEnd {
  /** The HTTP Basic user Icecast logs for this listener: HAProxy's per-connection ticket (`proxy-<uuid>`). */
  user: string;
  /** Bytes HAProxy sent to the listener, response headers included (as Icecast's access log counts them). */
  bytes: number;
}

export type ListenerEndListener = (end: ListenerEnd) => void;

/** The user name HAProxy gives each listener's connection in front of Icecast (haproxy-config.ts). */
export const PROXY_USER = 'proxy-';

/** How long a listener HAProxy admitted may wait in its queue for a place in Icecast (`timeout queue`). */
export const PROXY_QUEUE_SECONDS = 60;

/**
 * How long after its admission a listener may still be missing from Icecast's listclients without having left. Icecast
 * asks about a listener it already holds, so a moment suffices; HAProxy asks before its queue, where a listener
 * admitted in a burst may wait until `timeout queue`. Freeing its place sooner would let one more listener in than
 * the stream's cap once the queued one reaches Icecast.
 */
export function listclientsLagMs(clientId: string): number {
  return clientId.startsWith(PROXY_USER) ? (PROXY_QUEUE_SECONDS + 10) * 1000 : 10_000;
}

/**
 * A listener HAProxy let in reaches Icecast with its ticket (\`proxy-<uuid>\`) before its own User-Agent: its mount has
 * no authentication (so Icecast records no user name), while its access-log line and listclients keep the agent.
 */
const PROXIED_AGENT = /^(proxy-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?: (.*))?$/s;

/** The user (HAProxy's ticket) and the listener's own agent from the agent Icecast saw; no user for other clients. */
export function proxiedAgent(agent: string): { user?: string; userAgent: string } {
  const m = PROXIED_AGENT.exec(agent);
  return m ? { user: m[1], userAgent: m[2] ?? '' } : { userAgent: agent };
}

/** Whether a listener's access-log line will be followed (or was preceded) by its proxy's own count. */
export const reportedByProxy = (user: string | null): boolean => user?.startsWith(PROXY_USER) ?? false;

/**
 * The key of a listener's place as Icecast lists it: HAProxy's ticket (its user name) for a listener HAProxy admitted
 * before Icecast gave it an id, else Icecast's client id (the id its listener_add named).
 */
export const placeKey = (listener: { id: string; user?: string }): string =>
  listener.user && reportedByProxy(listener.user) ? listener.user : listener.id;
