/** Target length of an HLS segment: a client is present while it fetched something within twice this. */
export const HLS_SEGMENT_SECONDS = 4;
/** Segments a rendition's playlist lists (ffmpeg's hls_list_size). */
export const HLS_LIST_SIZE = 6;
/**
 * How long a cache may keep a segment: about its life on the host (listed for HLS_LIST_SIZE segments, kept a couple
 * more). Its name is never reused, so a longer keep would be harmless, only wasted.
 */
export const HLS_SEGMENT_MAX_AGE_SECONDS = HLS_SEGMENT_SECONDS * (HLS_LIST_SIZE + 2);

/** The Basic user and the agent our segmenter reads a mount with (its password is a per-process secret). */
export const HLS_SEGMENTER_USER = 'hls-segmenter';
export const HLS_SEGMENTER_AGENT = 'agent-audio-api-hls-segmenter/1';

/** The public HLS address of a service (a multivariant playlist): `endpoints.hls_url` and the listen page use it. */
export function hlsUrlFor(apiBaseUrl: string, service: { id: string }): string {
  return `${apiBaseUrl}/hls/${encodeURIComponent(service.id)}/index.m3u8`;
}
