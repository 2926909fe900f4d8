import { HLS_SEGMENT_SECONDS } from '../../hls/index.js';
import type { OpenApiPart } from './part.js';

const error = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});
const playlist = (description: string) => ({
  description,
  headers: { 'Cache-Control': { schema: { const: 'no-store' } } },
  content: { 'application/vnd.apple.mpegurl': { schema: { type: 'string' } } },
});
const serviceId = {
  name: 'service_id',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: '^[a-zA-Z0-9_-]{8,120}$' },
};
const segment = {
  name: 'segment',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: '^seg[0-9]{1,12}-[A-Za-z0-9_-]{12}\\.ts$' },
};
const session = {
  name: 'session',
  in: 'query',
  required: true,
  schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{38}$' },
  description: 'The listener session named by index.m3u8, signed for this service (one player).',
};
const gone = error('service_not_active: the service was stopped, suspended or has expired; its HLS is gone.');
const notFound = error('service_not_found: no such service.');
const rateLimited = error('rate_limited or too_many_connections from this address: wait Retry-After seconds.');
const notReady = error(
  'hls_not_ready (retryable, Retry-After): the stream has no source to segment yet. ' +
    'host_lease_lost (retryable, Retry-After): its streaming host lost touch with the pool; read the service record.',
);
const hostAway = error(
  'host_lease_lost (retryable, Retry-After): the streaming host lost touch with the pool and serves nothing; ' +
    'retry, or read the service record for where it streams now.',
);
const badSession = error(
  'hls_session_invalid: the session is missing, malformed or not issued for this service; start again from index.m3u8.',
);
const fullOrShared = error(
  'listener_limit_reached (retryable, Retry-After): all bought listener places are taken, by Icecast and HLS ' +
    'listeners together. hls_session_shared: the session was fetched by several players at once and has ended; ' +
    'each player starts from index.m3u8.',
);
const tooFast = error(
  'hls_session_busy (retryable, Retry-After): the session fetches its playlist faster than a player does; or ' +
    'rate_limited / too_many_connections from this address.',
);
const segmentGone = error('hls_segment_not_found: no longer in the playlist; fetch live.m3u8 again.');
const presence =
  `A session is a listener while it fetched something within ${2 * HLS_SEGMENT_SECONDS} s ` +
  '(twice the segment length); one that comes back later takes a place again if one is free.';
const tag =
  `A service's stream as HLS (AAC in MPEG-TS segments of about ${HLS_SEGMENT_SECONDS} s, ` +
  'a sliding playlist), for browsers and iOS: the address is endpoints.hls_url of the service record. ' +
  'Public like the Icecast URL; any origin may read it (CORS). HLS listeners take the bought listener places ' +
  `and count in the usage (listeners, listener_hours, bytes sent, transfer). ${presence}`;

/** OpenAPI for the HLS tag (merged into /openapi.json by src/http/openapi.ts). */
export const part: OpenApiPart = {
  tags: [{ name: 'HLS', description: tag }],
  schemas: {},
  paths: {
    '/hls/{service_id}/index.m3u8': {
      get: {
        tags: ['HLS'],
        operationId: 'getHlsPlaylist',
        security: [],
        summary: 'The multivariant playlist: names the media playlist of a new listener session.',
        description: 'Takes no place and starts nothing: the session takes its place at its media playlist.',
        parameters: [serviceId],
        responses: {
          200: playlist('One variant, live.m3u8?session=…'),
          404: notFound,
          410: gone,
          429: rateLimited,
          503: hostAway,
        },
      },
    },
    '/hls/{service_id}/live.m3u8': {
      get: {
        tags: ['HLS'],
        operationId: 'getHlsMediaPlaylist',
        security: [],
        summary: "A session's sliding media playlist: takes the session's place; segment addresses are shared.",
        description:
          `${presence} The first fetch starts the rendition and waits for its first segment (a few seconds). ` +
          "index.m3u8 names it at the HLS server's address (a CDN's or the streaming host's, as segments), which " +
          "answers a session's later fetches itself; here it answers the same. " +
          'Fetched at most once a second (a few at once): a session fetched faster again and again is one shared by players, and ends.',
        parameters: [serviceId, session],
        responses: {
          200: playlist('The last six segments.'),
          400: badSession,
          403: fullOrShared,
          404: notFound,
          410: gone,
          429: tooFast,
          503: notReady,
        },
      },
    },
    '/hls/{service_id}/{segment}': {
      get: {
        tags: ['HLS'],
        operationId: 'getHlsSegment',
        security: [],
        summary: 'One segment, at the same address for every listener (no session): any cache may keep it.',
        description:
          "A session's usage counts the segments its playlists gave it (the last three of its first, then each new one).",
        parameters: [serviceId, segment],
        responses: {
          200: {
            description:
              'MPEG-TS with AAC; names are never reused (Cache-Control: public, max-age=32: about its life on the host).',
            headers: { 'Cache-Control': { schema: { type: 'string' } } },
            content: { 'video/mp2t': { schema: { type: 'string', format: 'binary' } } },
          },
          404: segmentGone,
          410: gone,
          429: rateLimited,
          503: hostAway,
        },
      },
    },
  },
};
