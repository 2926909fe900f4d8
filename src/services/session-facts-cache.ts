import { listenerFacts, type ListenerFacts } from '../stats/index.js';
import { clientNetwork } from './listener-sessions.js';

const MAX_AGENT = 400;
const KEPT = 2000;

/** What a session's facts depend on: the listener's network and its user agent. */
export const factsKey = (ip: string, userAgent: string) => `${clientNetwork(ip)} ${userAgent.slice(0, MAX_AGENT)}`;

/**
 * A session's facts (country, device, platform) per network and user agent: parsing a user agent costs more than the
 * rest of an admission, and a burst of listeners brings few distinct ones.
 */
export class SessionFactsCache {
  private readonly known = new Map<string, ListenerFacts>();

  /** The facts of these listeners, by factsKey. */
  async of(listeners: Array<{ ip: string; userAgent: string }>): Promise<Map<string, ListenerFacts>> {
    const batch = new Map<string, ListenerFacts>();
    for (const { ip, userAgent } of listeners) {
      const key = factsKey(ip, userAgent);
      if (batch.has(key)) continue;
      let facts = this.known.get(key);
      if (!facts) {
        facts = await listenerFacts(ip, userAgent.slice(0, MAX_AGENT));
        if (this.known.size >= KEPT) this.known.clear();
        this.known.set(key, facts);
      }
      batch.set(key, facts);
    }
    return batch;
  }
}
