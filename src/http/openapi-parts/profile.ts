import { ARTWORK_LIMITS } from '../../station-profile/index.js';
import { profileSchema } from '../service-profile.js';
import { error, ok, ref } from './common.js';
import { owner, ownerErrors, serviceIdParameter } from './owner-access.js';
import type { OpenApiPart } from './part.js';

const artwork = {
  type: ['object', 'null'],
  required: ['name', 'content_type', 'size_bytes', 'width', 'height', 'url'],
  properties: {
    name: { type: 'string', description: 'Its file name under the listen page (from its content).' },
    content_type: { enum: ['image/png', 'image/jpeg', 'image/webp'] },
    size_bytes: { type: 'integer' },
    width: { type: 'integer' },
    height: { type: 'integer' },
    url: { type: 'string', description: 'Where listeners and link previews load it (public).' },
  },
};

const profileResponse = {
  type: 'object',
  required: ['ok', 'profile'],
  properties: {
    ok: { const: true },
    profile: {
      type: 'object',
      required: ['name', 'description', 'show_time_left', 'artwork', 'listen_page'],
      properties: {
        name: {
          type: ['string', 'null'],
          description: "The owner's name for the station; null: the order's station_name.",
        },
        description: { type: ['string', 'null'], description: "null: the order's metadata.station_description." },
        show_time_left: {
          type: ['boolean', 'null'],
          description:
            "Whether the page shows the time left; null: the order's metadata.show_time_left (default false).",
        },
        artwork: artwork,
        listen_page: { type: 'string', description: 'The public listen page it appears on.' },
        links: {
          type: 'object',
          description:
            "The owner's pages about the station: listener statistics (stats, and stats_csv for a spreadsheet), " +
            'recordings, podcast_feed and usage.',
          properties: {
            stats: { type: 'string' },
            stats_csv: { type: 'string' },
            recordings: { type: 'string' },
            podcast_feed: { type: 'string' },
            usage: { type: 'string' },
          },
        },
      },
    },
  },
};

const image = { schema: { type: 'string', format: 'binary' } };
const withProfile = { 200: ok('The profile now', 'StationProfileResponse'), ...ownerErrors };

/** OpenAPI of the station profile: name, description, time left and artwork of the listen page, set by the owner. */
export const part: OpenApiPart = {
  schemas: { StationProfileRequest: profileSchema, StationProfileResponse: profileResponse },
  paths: {
    '/services/{service_id}/profile': {
      get: {
        ...owner,
        operationId: 'getStationProfile',
        parameters: [serviceIdParameter],
        summary: "The station's profile on its listen page: name, description, time left shown or not, artwork.",
        responses: withProfile,
      },
      put: {
        ...owner,
        operationId: 'setStationProfile',
        parameters: [serviceIdParameter],
        summary: 'Change the name, description or whether the page shows the time left (null: as the order said).',
        requestBody: { required: true, content: { 'application/json': { schema: ref('StationProfileRequest') } } },
        responses: {
          ...withProfile,
          415: error('unsupported_media_type: send application/json.'),
          422: error('invalid_request: an unknown field, control characters, or a text over its length.'),
        },
      },
    },
    '/services/{service_id}/profile/artwork': {
      put: {
        ...owner,
        operationId: 'setStationArtwork',
        parameters: [serviceIdParameter],
        summary: `Upload the artwork: the image itself as the body (PNG, JPEG or WebP, at most ${ARTWORK_LIMITS.maxBytes} bytes).`,
        description:
          'Checked as an image (its type from its bytes, its size read from its header) and kept with the ' +
          "service's media; no URL is fetched. It replaces the previous one.",
        requestBody: {
          required: true,
          content: {
            'image/png': image,
            'image/jpeg': image,
            'image/webp': image,
          },
        },
        responses: {
          ...withProfile,
          411: error('length_required: send the image with a Content-Length header.'),
          413: error('image_too_large: the image is over the limit.'),
          415: error(
            'unsupported_image_type (not a PNG, JPEG or WebP) or image_type_mismatch (Content-Type names another type).',
          ),
          422: error(
            `image_size_out_of_range: each side must be ${ARTWORK_LIMITS.minSide} to ${ARTWORK_LIMITS.maxSide} px.`,
          ),
        },
      },
      delete: {
        ...owner,
        operationId: 'removeStationArtwork',
        parameters: [serviceIdParameter],
        summary: 'Remove the artwork (the page shows none).',
        responses: withProfile,
      },
    },
  },
};
