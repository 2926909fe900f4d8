/** Target length of an HLS segment: a client is present while it fetched something within twice this. */
export const HLS_SEGMENT_SECONDS = 4;

/** The Basic user and the agent our segmenter reads a mount with (its password is a per-process secret). */
export const HLS_SEGMENTER_USER = 'hls-segmenter';
export const HLS_SEGMENTER_AGENT = 'agent-audio-api-hls-segmenter/1';

/** The public HLS address of a service (a multivariant playlist): `endpoints.hls_url` and the listen page use it. */
export function hlsUrlFor(apiBaseUrl: string, service: { id: string }): string {
  return `${apiBaseUrl}/hls/${encodeURIComponent(service.id)}/index.m3u8`;
}
