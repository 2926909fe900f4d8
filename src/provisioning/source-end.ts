/**
 * One source connection as the proxy in front of Icecast saw it end (the front door, or HAProxy's end-of-connection
 * log): the exact bytes of the source's body it passed on, where Icecast's own counter lags by up to 5 s.
 */
export interface SourceEnd {
  /** The mount the source sent to (the request path, without a query). */
  mount: string;
  /** Bytes after the request head that the proxy read from the encoder and passed to Icecast. */
  bytes: number;
  /** When the proxy accepted the connection (ms since epoch). */
  openedAt: number;
  /** When it closed (ms since epoch). */
  closedAt: number;
}

export type SourceEndListener = (end: SourceEnd) => void;

/** The mount a source's request line names (`PUT /m.mp3?x HTTP/1.1` → `/m.mp3`), or undefined for other requests. */
export function sourceMountOf(head: string): string | undefined {
  const lineEnd = head.indexOf('\r\n');
  const [method = '', target = ''] = (lineEnd === -1 ? head : head.slice(0, lineEnd)).split(' ');
  if (method !== 'PUT' && method !== 'SOURCE') return undefined;
  const path = target.split('?')[0];
  return path.startsWith('/') && !path.startsWith('/admin') ? path : undefined;
}

/**
 * A source the proxy let in was taken by Icecast (present) or its connection closed (not present): what Icecast's
 * mount_add and mount_remove told, when Icecast is not asked (HAProxy decides sources itself).
 */
export interface SourcePresence {
  mount: string;
  present: boolean;
}

export type SourcePresenceListener = (event: SourcePresence) => void;
