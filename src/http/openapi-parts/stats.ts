import { CSV_COLUMNS, MAX_DAYS } from '../../stats/index.js';
import { error, ok, ref } from './common.js';
import { owner, ownerErrors, serviceIdParameter } from './owner-access.js';
import type { OpenApiPart } from './part.js';

const hours = {
  type: 'string',
  pattern: '^\\d+(\\.\\d{1,6})?$',
  description: 'Listener-hours (decimal string): the listening time of sessions, as defined in docs/stations.md.',
};
const breakdown = {
  type: 'array',
  items: {
    type: 'object',
    required: ['key', 'unique_listeners', 'listening_hours'],
    additionalProperties: false,
    properties: { key: { type: 'string' }, unique_listeners: { type: 'integer' }, listening_hours: hours },
  },
};
const figures = {
  unique_listeners: {
    type: 'integer',
    description: 'Distinct listeners: one per network (/24 or /48) and user agent.',
  },
  sessions: { type: 'integer', description: 'Listener sessions (connections, HLS sessions) heard in the period.' },
  listening_hours: hours,
  average_listening_seconds: {
    type: ['number', 'null'],
    description: 'Listening time per unique listener (seconds); null without listeners.',
  },
  peak_listeners: { type: 'integer', description: 'The most sessions at once.' },
  peak_at: { type: ['string', 'null'], format: 'date-time', description: 'The first moment of that peak.' },
};
const figureNames = Object.keys(figures);
const day = {
  type: 'object',
  required: ['date', ...figureNames, 'by_protocol', 'by_device_class', 'by_platform', 'by_country', 'top_tracks'],
  properties: {
    date: { type: 'string', format: 'date' },
    ...figures,
    by_protocol: { ...breakdown, description: 'icecast, hls.' },
    by_device_class: {
      ...breakdown,
      description: 'mobile, tablet, desktop, smarttv, console, wearable, embedded, other (players and apps).',
    },
    by_platform: { ...breakdown, description: 'The operating system (iOS, Android, Windows, macOS, Linux…), unknown.' },
    by_country: { ...breakdown, description: 'ISO 3166-1 alpha-2 of the listener network, unknown.' },
    top_tracks: {
      type: 'array',
      maxItems: 10,
      items: {
        type: 'object',
        required: ['title', 'artist', 'listeners'],
        properties: { title: { type: 'string' }, artist: { type: ['string', 'null'] }, listeners: { type: 'integer' } },
      },
    },
  },
};
const query = (name: string, description: string, schema: object) => ({ name, in: 'query', schema, description });
const parameters = [
  serviceIdParameter,
  query('from', 'First day (UTC, YYYY-MM-DD); default: 6 days before to.', { type: 'string', format: 'date' }),
  query('to', 'Last day, included (UTC); default: today.', { type: 'string', format: 'date' }),
  query('group', 'day: figures per UTC day (the only grouping).', { const: 'day' }),
];
const statsErrors = {
  ...ownerErrors,
  400: error(
    `invalid_stats_query: a date not as YYYY-MM-DD, from after to, more than ${MAX_DAYS} days, group or format unknown.`,
  ),
};

/** OpenAPI of the owner's listener statistics per day (JSON and CSV). */
export const part: OpenApiPart = {
  schemas: {
    ListenerStats: {
      type: 'object',
      required: ['ok', 'stats'],
      properties: {
        ok: { const: true },
        stats: {
          type: 'object',
          required: ['service_id', 'group', 'time_zone', 'from', 'to', 'totals', 'days', 'links'],
          properties: {
            service_id: { type: 'string' },
            group: { const: 'day' },
            time_zone: { const: 'UTC' },
            from: { type: 'string', format: 'date' },
            to: { type: 'string', format: 'date' },
            totals: {
              type: 'object',
              required: figureNames,
              properties: figures,
              description: 'The whole range: a listener of several days counts once; the peak is the highest day.',
            },
            days: { type: 'array', items: ref('ListenerStatsDay'), description: 'Every day of the range, in order.' },
            links: {
              type: 'object',
              required: ['csv', 'usage'],
              properties: { csv: { type: 'string' }, usage: { type: 'string' } },
            },
          },
        },
      },
    },
    ListenerStatsDay: day,
  },
  paths: {
    '/services/{service_id}/stats': {
      get: {
        ...owner,
        operationId: 'getListenerStats',
        parameters: [...parameters, query('format', 'csv: the CSV export instead.', { enum: ['json', 'csv'] })],
        summary:
          'Listener figures per day: unique listeners, listening hours, peak and when, average listening time, ' +
          'by protocol, device class, platform and country, top tracks.',
        description:
          'From the listener sessions (GET /services/{service_id}/listeners); listening hours are the same ' +
          "figure as the usage's listener_hours. Definitions: docs/stations.md, Listener statistics.",
        responses: { 200: ok('The statistics', 'ListenerStats'), ...statsErrors },
      },
    },
    '/services/{service_id}/stats.csv': {
      get: {
        ...owner,
        operationId: 'getListenerStatsCsv',
        parameters,
        summary: 'The statistics as CSV (RFC 4180), for a spreadsheet.',
        description:
          `Columns: ${CSV_COLUMNS.join(', ')}. Per day a row of dimension total (every column), then one per ` +
          'protocol, device_class, platform and country (unique_listeners, listening_hours) and per track ' +
          '(track, key "artist - title", unique_listeners). Text a spreadsheet would run as a formula starts with an apostrophe.',
        responses: {
          200: {
            description: 'CSV with a header row',
            content: { 'text/csv': { schema: { type: 'string' } } },
          },
          ...statsErrors,
        },
      },
    },
  },
};
