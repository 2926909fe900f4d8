import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type Router from '@koa/router';
import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import { byteRangeOf, podcastFeedXml, type Recording } from '../recordings/index.js';
import type { ServiceRow } from '../services/index.js';
import { ownedServiceOf } from './owned-service.js';
import {
  podcastFeedUrl,
  type RecordingRouteDeps,
  recordingDocument,
  recordingNotFound,
  recordingParts,
} from './recordings-documents.js';

const SERVICE_ID = /^[a-zA-Z0-9_-]{8,120}$/;
/** A recording's id, with or without its file's extension (download_url has it). */
export const RECORDING = /^(rec_[A-Za-z0-9_-]{8,40})(\.(mp3|aac|ogg))?$/;

/**
 * The recordings' audio and the podcast feed. Public when the owner keeps the feed public (the default): podcast apps
 * read them without credentials, and only finished shows are in it; otherwise the owner's key or wallet.
 */
export function recordingFileRoutes(router: Router, deps: RecordingRouteDeps): void {
  router.get('/services/:service_id/recordings/:recording_id', async (ctx) => {
    const name = RECORDING.exec(ctx.params.recording_id);
    if (!name) throw recordingNotFound();
    const { service, owner } = await readableService(ctx, deps);
    const { store, media } = recordingParts(deps);
    const recording = await store.get(service.id, name[1]);
    if (!recording || (!owner && recording.status !== 'complete')) throw recordingNotFound();
    await sendFile(ctx, media.pathOf(service.id, recording.file_name), recording);
  });

  router.get('/services/:service_id/podcast.xml', async (ctx) => {
    const { service } = await readableService(ctx, deps);
    const { store } = recordingParts(deps);
    const station = await deps.listen!.station(service);
    const api = deps.publicBaseUrl();
    const channel = {
      title: station.station_name,
      description: station.description,
      link: station.listen_page,
      imageUrl: station.artwork_url ?? `${api}/listen/assets/favicon.png`,
      feedUrl: podcastFeedUrl(api, service.id),
    };
    const items = await store.list(service.id, true);
    ctx.type = 'application/rss+xml; charset=utf-8';
    ctx.set('Cache-Control', 'public, max-age=60');
    ctx.body = podcastFeedXml(channel, items, (r) => recordingDocument(api, r).download_url);
  });
}

/** The service whose feed or file is asked for: anyone's when its feed is public, else only its owner's. */
async function readableService(
  ctx: Context,
  deps: RecordingRouteDeps,
): Promise<{ service: ServiceRow; owner: boolean }> {
  const id = ctx.params.service_id;
  const service = SERVICE_ID.test(id) ? await deps.services?.byId(id) : undefined;
  const { store } = recordingParts(deps);
  const setting = service && (await store.setting(service.id, service.limits));
  const anyone = service && setting?.feed_public ? { service, owner: false } : undefined;
  if (anyone && !ctx.get('Authorization')) return anyone;
  try {
    return { service: await ownedServiceOf(ctx, deps), owner: true };
  } catch (err) {
    if (anyone) return anyone;
    throw err;
  }
}

/** The file, whole or the one range asked (podcast apps seek): 206 with Content-Range, 416 past its end. */
async function sendFile(ctx: Context, path: string, recording: Recording): Promise<void> {
  const size = await stat(path).then(
    (s) => s.size,
    () => {
      throw new ApiError(404, 'recording_not_found', 'The audio of this recording is not there (deleted meanwhile).');
    },
  );
  ctx.set('Accept-Ranges', 'bytes');
  ctx.set('Cache-Control', recording.status === 'complete' ? 'public, max-age=3600' : 'no-store');
  ctx.set('Content-Disposition', `inline; filename="${recording.id}.${recording.file_name.split('.').pop()}"`);
  const range = byteRangeOf(ctx.get('Range') || undefined, size);
  if (range === 'unsatisfiable') {
    ctx.set('Content-Range', `bytes */${size}`);
    throw new ApiError(416, 'range_not_satisfiable', `The file has ${size} bytes; ask for a range within them.`);
  }
  ctx.type = recording.content_type;
  const { start, end } = range ?? { start: 0, end: size - 1 };
  if (range) {
    ctx.status = 206;
    ctx.set('Content-Range', `bytes ${start}-${end}/${size}`);
  }
  ctx.length = Math.max(0, end - start + 1);
  ctx.body = size === 0 ? '' : createReadStream(path, { start, end });
}
