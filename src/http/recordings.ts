import type Router from '@koa/router';
import { ApiError } from '../errors/index.js';
import { type RecordingSetting, type RecordingStore, removeShowFiles, storageProblem } from '../recordings/index.js';
import type { ServiceRow } from '../services/index.js';
import {
  ownedRecordings,
  podcastFeedUrl,
  type RecordingRouteDeps,
  recordingDocument,
  recordingNotFound,
  storageOfService,
} from './recordings-documents.js';
import { RECORDING, recordingFileRoutes } from './recordings-files.js';
import { bodyReader } from './request-body.js';

export const recordingSettingSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['enabled'],
  properties: {
    enabled: { type: 'boolean', description: 'Record every live show (source session) of this service from now on.' },
    public: {
      type: 'boolean',
      description:
        'Whether the podcast feed and its finished recordings are public (podcast apps and directories read them without credentials). Default true; false: only you, with your key or wallet.',
    },
  },
};
const readSetting = bodyReader<{ enabled: boolean; public?: boolean }>(recordingSettingSchema, 'recording setting');

/**
 * Live shows kept as recordings, for the service's owner: turn recording on or off, list, delete; the files and the
 * podcast feed are in recordings-files.ts.
 */
export function recordingRoutes(router: Router, deps: RecordingRouteDeps): void {
  router.get('/services/:service_id/recordings', async (ctx) => {
    const { service, store } = await ownedRecordings(ctx, deps);
    const items = await store.list(service.id);
    ctx.body = {
      ok: true,
      ...(await settingDocument(service, store, await store.setting(service.id, service.limits), deps)),
      recordings: items.map((r) => recordingDocument(deps.publicBaseUrl(), r)),
    };
  });

  router.put('/services/:service_id/recording', async (ctx) => {
    const { service, store } = await ownedRecordings(ctx, deps);
    const body = await readSetting(ctx);
    const before = await store.setting(service.id, service.limits);
    if (body.enabled) refuseWithoutRoom(storageOfService(service, deps), await store.usedBytes(service.id));
    const setting = await store.setSetting(service.id, {
      enabled: body.enabled,
      feed_public: body.public ?? before.feed_public,
    });
    ctx.body = { ok: true, ...(await settingDocument(service, store, setting, deps)) };
  });

  router.delete('/services/:service_id/recordings/:recording_id', async (ctx) => {
    const { service, store, media } = await ownedRecordings(ctx, deps);
    const id = RECORDING.exec(ctx.params.recording_id)?.[1];
    const removed = id && (await store.remove(service.id, id));
    if (!removed) throw recordingNotFound();
    await removeShowFiles((serviceId, name) => media.pathOf(serviceId, name), service.id, removed.id);
    ctx.body = { ok: true, deleted: recordingDocument(deps.publicBaseUrl(), removed) };
  });

  recordingFileRoutes(router, deps);
}

function refuseWithoutRoom(bought: number, usedBytes: number): void {
  const problem = storageProblem(bought, usedBytes);
  if (!problem) return;
  const code = bought ? 'recording_storage_full' : 'recording_not_offered';
  throw new ApiError(code === 'recording_storage_full' ? 409 : 422, code, `Recording cannot be turned on: ${problem}.`);
}

async function settingDocument(
  service: ServiceRow,
  store: RecordingStore,
  setting: RecordingSetting,
  deps: RecordingRouteDeps,
) {
  const used = await store.usedBytes(service.id);
  const bought = storageOfService(service, deps);
  return {
    recording: {
      enabled: setting.enabled,
      public: setting.feed_public,
      storage: { bought_bytes: bought, used_bytes: used },
      refused_because: setting.enabled ? (storageProblem(bought, used) ?? null) : null,
      podcast_feed: podcastFeedUrl(deps.publicBaseUrl(), service.id),
    },
  };
}
