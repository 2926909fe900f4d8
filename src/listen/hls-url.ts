import type { ServiceRow } from '../services/index.js';

/**
 * The service's HLS playlist address, or null when it has none. The HLS rendition (issue 23, section 2) fills this
 * in; until then the listen page plays the Icecast MP3 stream.
 */
export function hlsUrlFor(_service: ServiceRow): string | null {
  return null;
}
