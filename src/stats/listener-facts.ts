import { countries } from './countries.js';
import { deviceOf } from './devices.js';

/** What a listener's session is grouped by in the statistics, from what admission sees (its address is not kept). */
export interface ListenerFacts {
  country: string | null;
  device_class: string;
  platform: string;
}

/** The country of the listener's network (its /24 or /48, not its address) and its user agent's device. */
export async function listenerFacts(ip: string, userAgent: string): Promise<ListenerFacts> {
  return { country: (await countries()).countryOf(ip), ...deviceOf(userAgent) };
}
