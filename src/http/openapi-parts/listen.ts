import { listenerAggregatesSchema } from '../response-schemas.js';
import { nowPlayingSchema } from '../schemas.js';
import { error, ok, rateLimited, ref } from './common.js';
import { owner, ownerErrors, serviceIdParameter } from './owner-access.js';
import type { OpenApiPart } from './part.js';

const publicErrors = {
  404: error('stream_not_found: no stream at this address.'),
  410: error('stream_ended: the stream was stopped, expired or could not be set up.'),
  429: rateLimited,
  503: error('stream_off_air: the stream is paused (suspended) or being set up; retry after Retry-After.'),
};
const nullableString = { type: ['string', 'null'] };
const dateTime = { type: 'string', format: 'date-time' };

const track = {
  type: 'object',
  required: ['title', 'artist', 'source', 'started_at'],
  additionalProperties: false,
  properties: {
    title: { type: 'string' },
    artist: nullableString,
    source: {
      enum: ['autodj', 'live', 'owner'],
      description:
        "autodj: the file's tags (else its name); live: the encoder's metadata (ICY/updinfo); " +
        'owner: PUT now-playing.',
    },
    started_at: dateTime,
  },
};
const publicTrack = {
  type: 'object',
  required: ['title', 'artist', 'started_at', 'artwork_url'],
  additionalProperties: false,
  properties: {
    title: { type: 'string' },
    artist: nullableString,
    started_at: dateTime,
    artwork_url: {
      type: ['string', 'null'],
      description:
        "The cover picture (PNG or JPEG) the track's uploaded file carries; null for live titles (sources send " +
        "titles only) and files without one: the page shows the station's artwork then.",
    },
  },
};
const session = {
  type: 'object',
  additionalProperties: false,
  required: [
    'session_id',
    'protocol',
    'client_network',
    'user_agent',
    'started_at',
    'ended_at',
    'duration_seconds',
    'bytes',
  ],
  properties: {
    session_id: { type: 'string' },
    protocol: { enum: ['icecast', 'hls'] },
    client_network: { type: 'string', description: "The client's /24 (IPv4) or /48 (IPv6), never its address." },
    user_agent: { type: 'string' },
    started_at: dateTime,
    ended_at: { type: ['string', 'null'], format: 'date-time' },
    duration_seconds: { type: 'integer' },
    bytes: {
      type: ['integer', 'null'],
      description: "Bytes sent to it (headers included, from Icecast's access log); null until it has left.",
    },
  },
};

/** OpenAPI of the public listen page's JSON and the owner's now-playing and listener routes. */
export const part: OpenApiPart = {
  tags: [
    {
      name: 'Listen',
      description:
        "A service's public side, for people: the listen page (HTML at endpoints.listen_page), the " +
        'embeddable player (endpoints.listen_embed), oEmbed and the JSON they read. No credentials, no owner data.',
    },
  ],
  schemas: {
    Track: track,
    NowPlayingRequest: nowPlayingSchema,
    NowPlayingResponse: {
      type: 'object',
      required: ['ok', 'now_playing'],
      properties: {
        ok: { const: true },
        now_playing: { oneOf: [ref('Track'), { type: 'null' }] },
        history: { type: 'array', maxItems: 20, items: ref('Track') },
      },
    },
    ListenerSession: session,
    ListenerAggregates: listenerAggregatesSchema,
    ListenersResponse: {
      type: 'object',
      required: ['ok', 'current', 'recent', 'next_cursor', 'aggregates'],
      properties: {
        ok: { const: true },
        current: { type: 'array', items: ref('ListenerSession') },
        recent: { type: 'array', items: ref('ListenerSession') },
        next_cursor: {
          type: ['string', 'null'],
          description: 'Pass as cursor for the next page of recent sessions; null on the last.',
        },
        aggregates: ref('ListenerAggregates'),
      },
    },
    ListenView: {
      type: 'object',
      required: ['ok', 'listen'],
      properties: {
        ok: { const: true },
        listen: {
          type: 'object',
          additionalProperties: false,
          required: [
            'service_id',
            'station_name',
            'description',
            'artwork_url',
            'show_time_left',
            'status',
            'on_air',
            'stream_url',
            'hls_url',
            'now_playing',
            'history',
            'listeners',
            'expires_at',
            'remaining_seconds',
            'listen_page',
            'listen_embed',
            'now_playing_public',
          ],
          properties: {
            service_id: { type: 'string' },
            station_name: { type: 'string' },
            description: { type: ['string', 'null'], description: "The owner's words about the station." },
            artwork_url: { type: ['string', 'null'], description: "The station's artwork (PNG, JPEG or WebP)." },
            show_time_left: {
              type: 'boolean',
              description: 'The owner shows the time left; when false, expires_at and remaining_seconds are null.',
            },
            status: { const: 'active' },
            on_air: { type: 'boolean' },
            stream_url: { type: 'string', description: 'The Icecast MP3 stream.' },
            hls_url: { type: ['string', 'null'], description: 'The HLS playlist when the service has one.' },
            now_playing: { oneOf: [ref('PublicTrack'), { type: 'null' }] },
            history: { type: 'array', items: ref('PublicTrack') },
            listeners: { type: 'object', required: ['current'], properties: { current: { type: 'integer' } } },
            expires_at: { type: ['string', 'null'], format: 'date-time' },
            remaining_seconds: { type: ['integer', 'null'] },
            listen_page: { type: 'string' },
            listen_embed: { type: 'string' },
            now_playing_public: { type: 'string' },
          },
        },
      },
    },
    PublicTrack: publicTrack,
    OEmbed: {
      type: 'object',
      required: ['version', 'type', 'html', 'width', 'height', 'title'],
      properties: {
        version: { const: '1.0' },
        type: { const: 'rich' },
        provider_name: { type: 'string' },
        provider_url: { type: 'string' },
        title: { type: 'string' },
        html: { type: 'string' },
        width: { type: 'integer' },
        height: { type: 'integer' },
      },
    },
  },
  paths: {
    '/services/{service_id}/now-playing': {
      get: {
        ...owner,
        operationId: 'getNowPlaying',
        parameters: [serviceIdParameter],
        summary:
          'What the service plays now and its last 20 tracks, each with when it started and where the title ' +
          'came from.',
        description:
          "AutoDJ: each file's artist and title tags (else its name). Live encoders: the metadata they " +
          "send (ICY or Icecast's /admin/metadata updinfo), read within about a second. Each change is also the " +
          'event track.changed (SSE and webhooks).',
        responses: { 200: ok('Now playing and history', 'NowPlayingResponse'), ...ownerErrors },
      },
      put: {
        ...owner,
        operationId: 'setNowPlaying',
        parameters: [serviceIdParameter],
        summary:
          "Set what plays now, for sources that send no metadata; listeners' players get it as the stream's " +
          'title too.',
        requestBody: { required: true, content: { 'application/json': { schema: ref('NowPlayingRequest') } } },
        responses: {
          200: ok('What plays now', 'NowPlayingResponse'),
          ...ownerErrors,
          409: error('service_not_active: the service is not active.'),
          422: error('invalid_request: title missing, empty or longer than 300 characters.'),
        },
      },
    },
    '/services/{service_id}/listeners': {
      get: {
        ...owner,
        operationId: 'listListeners',
        parameters: [
          serviceIdParameter,
          {
            name: 'limit',
            in: 'query',
            schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 },
            description: 'Recent sessions per page.',
          },
          {
            name: 'cursor',
            in: 'query',
            schema: { type: 'string', pattern: '^\\d{1,18}$' },
            description: 'next_cursor of the previous page.',
          },
        ],
        summary:
          'Listener sessions: those connected now and the recent ones (paged), with bytes, duration, user ' +
          'agent and network; and their aggregates.',
        responses: {
          200: ok('Sessions', 'ListenersResponse'),
          ...ownerErrors,
          400: error('invalid_limit or invalid_cursor.'),
        },
      },
    },
    '/listen/{service_id}/now-playing': {
      get: {
        tags: ['Listen'],
        security: [],
        operationId: 'getPublicListen',
        parameters: [serviceIdParameter],
        summary:
          "The public JSON of a service's listen page: station name, stream and HLS addresses, now playing, " +
          'history, listener count, time left.',
        description:
          'What the listen page (HTML, GET /listen/{service_id}) and its embed ' +
          '(GET /listen/{service_id}/embed) read. Both pages answer 404, 410 or 503 with a readable HTML page when ' +
          'there is no stream to play.',
        responses: { 200: ok("The listen page's state", 'ListenView'), ...publicErrors },
      },
    },
    '/listen/oembed': {
      get: {
        tags: ['Listen'],
        security: [],
        operationId: 'getListenOEmbed',
        parameters: [
          {
            name: 'url',
            in: 'query',
            required: true,
            schema: { type: 'string' },
            description: 'A listen page address (endpoints.listen_page).',
          },
          { name: 'format', in: 'query', schema: { const: 'json' } },
        ],
        summary: 'oEmbed (rich) for a listen page: an iframe of the embeddable player.',
        responses: {
          200: ok('oEmbed', 'OEmbed'),
          ...publicErrors,
          501: error('oembed_format_not_supported: only json.'),
        },
      },
    },
  },
};
