import type Router from '@koa/router';
import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import type { Callers } from '../identity/index.js';
import type { ApiKeys } from '../keys/index.js';
import { type ListenPages, ownerLinks } from '../listen/index.js';
import type { MediaLibrary, ServiceRecords, ServiceRow } from '../services/index.js';
import { ARTWORK_LIMITS, checkArtwork, type ProfileChanges, type StationProfile } from '../station-profile/index.js';
import { ownedServiceOf } from './owned-service.js';
import { bodyReader } from './request-body.js';

export interface ServiceProfileDeps {
  keys: ApiKeys;
  services?: ServiceRecords;
  callers?: Callers;
  publicBaseUrl: () => string;
  listen?: ListenPages;
  media?: MediaLibrary;
}

const noControls = '^[^\\u0000-\\u001f\\u007f]*$';
export const profileSchema = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    name: {
      type: ['string', 'null'],
      minLength: 1,
      maxLength: 100,
      pattern: noControls,
      description: "The station's name on its page; null: the order's station_name.",
    },
    description: {
      type: ['string', 'null'],
      maxLength: 500,
      pattern: '^[^\\u0000-\\u0009\\u000b-\\u001f\\u007f]*$',
      description: "A few words about the station (line breaks kept); null: the order's metadata.station_description.",
    },
    show_time_left: {
      type: ['boolean', 'null'],
      description:
        "Show listeners the time left until the service ends; null: the order's metadata.show_time_left (default false).",
    },
  },
};
const readProfile = bodyReader<ProfileChanges>(profileSchema, 'station profile');

/**
 * The station's profile, for its owner (API key or the paying wallet, as for every service route): name,
 * description, whether the page shows the time left, and the artwork, uploaded as the image itself.
 */
export function serviceProfileRoutes(router: Router, deps: ServiceProfileDeps): void {
  const parts = (ctx: Context) => ownedProfile(ctx, deps);

  router.get('/services/:service_id/profile', async (ctx) => {
    const { service, profiles } = await parts(ctx);
    ctx.body = profileDocument(service, await profiles.get(service.id), deps);
  });

  router.put('/services/:service_id/profile', async (ctx) => {
    const { service, profiles } = await parts(ctx);
    const changes = await readProfile(ctx);
    ctx.body = profileDocument(service, await profiles.update(service.id, changes), deps);
  });

  router.put('/services/:service_id/profile/artwork', async (ctx) => {
    const { service, profiles, media } = await parts(ctx);
    const image = checkArtwork(await readImage(ctx), ctx.request.type.toLowerCase());
    const profile = await profiles.setArtwork(service.id, image, (id, name) => media.pathOf(id, name));
    ctx.body = profileDocument(service, profile, deps);
  });

  router.delete('/services/:service_id/profile/artwork', async (ctx) => {
    const { service, profiles, media } = await parts(ctx);
    const profile = await profiles.removeArtwork(service.id, (id, name) => media.pathOf(id, name));
    ctx.body = profileDocument(service, profile, deps);
  });
}

async function ownedProfile(ctx: Context, deps: ServiceProfileDeps) {
  const service = await ownedServiceOf(ctx, deps);
  if (!deps.listen || !deps.media) {
    throw new ApiError(
      503,
      'not_available',
      'Station profiles are not available on this deployment (streaming is off). Check GET /api/v1/availability.',
      { retryable: true },
    );
  }
  return { service, profiles: deps.listen.profiles, media: deps.media };
}

function profileDocument(service: ServiceRow, profile: StationProfile, deps: ServiceProfileDeps) {
  const page = `${deps.publicBaseUrl()}/listen/${service.id}`;
  const artwork = profile.artwork && { ...profile.artwork, url: `${page}/artwork/${profile.artwork.name}` };
  return {
    ok: true,
    profile: { ...profile, artwork, listen_page: page, links: ownerLinks(deps.publicBaseUrl(), service.id) },
  };
}

/** The request's body as an image: its Content-Length declared and within the artwork's limit. */
async function readImage(ctx: Context): Promise<Buffer> {
  const max = ARTWORK_LIMITS.maxBytes;
  const tooLarge = () => {
    ctx.set('Connection', 'close'); // the rest of the body is not read
    return new ApiError(
      413,
      'image_too_large',
      `The artwork may be at most ${max} bytes (1 MiB). Send a smaller image.`,
    );
  };
  const declared = ctx.get('Content-Length');
  if (!/^\d{1,12}$/.test(declared)) {
    throw new ApiError(411, 'length_required', 'Send the image as the body with a Content-Length header.');
  }
  if (Number(declared) > max) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > max) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
