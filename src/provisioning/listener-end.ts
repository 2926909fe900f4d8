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

/** Whether a listener's access-log line will be followed (or was preceded) by its proxy's own count. */
export const reportedByProxy = (user: string | null): boolean => user?.startsWith(PROXY_USER) ?? false;

/**
 * The key of a listener's place as Icecast lists it: HAProxy's ticket (its user name) for a listener HAProxy admitted
 * before Icecast gave it an id, else Icecast's client id (the id its listener_add named).
 */
export const placeKey = (listener: { id: string; user?: string }): string =>
  listener.user && reportedByProxy(listener.user) ? listener.user : listener.id;
