import { installed } from '../provisioning/index.js';
import type { StreamingSettings } from './config.js';

/** What holds the public streaming port: HAProxy, serve's front door, or Icecast itself ('none'). */
export function streamingProxy(settings: StreamingSettings): 'haproxy' | 'front-door' | 'none' {
  if (settings.proxy === 'haproxy') return 'haproxy';
  return settings.frontDoor ? 'front-door' : 'none';
}

/**
 * Why this host cannot start its streaming with these settings, if it cannot: HAProxy (the default proxy) is not
 * installed where Icecast is. Without icecast2 there is no streaming to start (Streaming.available).
 */
export function missingProxy(settings: StreamingSettings): string | undefined {
  if (settings.proxy !== 'haproxy' || !installed('icecast2') || installed('haproxy')) return undefined;
  return (
    'haproxy is not installed, and ICECAST_PROXY=haproxy (the default) puts it in front of Icecast: run npm run ' +
    "setup (it installs Debian's haproxy), or set ICECAST_PROXY=front-door to carry listeners through serve itself"
  );
}
