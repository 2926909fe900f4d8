import { join } from 'node:path';
import { HlsManager, hlsUrlFor } from '../../hls/index.js';
import { HostLease } from '../../hosts/index.js';
import { ListenPages } from '../../listen/index.js';
import {
  AutoDjManager,
  ListenerPlaces,
  ListenerSessions,
  MediaLibrary,
  NowPlaying,
  RelayManager,
  ServiceRecords,
} from '../../services/index.js';
import { includedStorageOf, Recorder } from '../../recordings/index.js';
import { Database } from '../../store/index.js';
import { hosting, type Foundation } from './foundation.js';

/** The parts that read and write services: records, media, now playing, players, HLS. */
export function streamingParts(base: Foundation) {
  const { config, log, db, stream, http } = base;
  const hostDb = hostDatabase(base);
  // HLS renditions read the local Icecast: served by instances that run one.
  const places = hosting(base)
    ? new ListenerPlaces(hostDb, log, () => stream.hostId(), config.streaming.admissionFullPassMs)
    : undefined;
  const lease = hosting(base)
    ? new HostLease(config.streaming.downAfterSeconds, config.streaming.heartbeatMs)
    : undefined;
  if (lease) base.metrics.watchLease(lease);
  const hls = hosting(base)
    ? new HlsManager({
        db: hostDb,
        dir: join(config.dataDir, 'hls'),
        icecastUrl: () => stream.localUrl(),
        hostId: () => stream.hostId(),
        log,
        places,
        leaseHeld: () => lease?.held ?? true,
        segmentServer: { listen: config.streaming.hlsListen, publicUrl: config.streaming.hlsPublicUrl },
        presenceMs: config.streaming.hlsPresenceMs,
        apiUrl: () => http.baseUrl,
        trustedProxies: [...config.trustedProxies],
      })
    : undefined;
  const hlsEndpoint = (s: { id: string }): Record<string, string> =>
    hls ? { hls_url: hlsUrlFor(http.publicBaseUrl, s) } : {};
  const services = new ServiceRecords(db, stream, () => http.publicBaseUrl, hlsEndpoint);
  const media = new MediaLibrary(hostDb, config.mediaDir, config.uploads);
  // The owner's titles this process sent to its Icecast: the host reconciler does not send them again.
  const titlesSent = new Map<string, string>();
  const nowPlaying = new NowPlaying(hostDb, {
    admin: () => stream.admin(),
    titlesSent,
    hostId: () => stream.hostId(),
  });
  const api = apiParts(base, hostDb, { media, nowPlaying }, titlesSent);
  const listenerSessions = new ListenerSessions(db);
  const listen = new ListenPages(db, services, api.nowPlaying, () => http.publicBaseUrl);
  const autodj = new AutoDjManager({
    db: hostDb,
    media,
    icecastUrl: () => stream.sourceUrl() ?? stream.publicUrl(),
    admin: () => stream.admin(),
    log,
    nowPlaying,
  });
  const relays = new RelayManager(
    hostDb,
    () => stream.sourceUrl() ?? stream.publicUrl(),
    log,
    config.relayFirstRetryMs,
  );
  const recorder = hosting(base) ? liveShowRecorder(base, hostDb, media, autodj) : undefined;
  return {
    hostDb,
    hls,
    places,
    lease,
    services,
    media,
    nowPlaying,
    titlesSent,
    api,
    listenerSessions,
    listen,
    autodj,
    relays,
    recorder,
  };
}

/** Records the live shows of this host's services into the media storage every host shares. */
function liveShowRecorder(base: Foundation, db: Database, media: MediaLibrary, autodj: AutoDjManager) {
  const { log, live, stream, config } = base;
  return new Recorder({
    db,
    log,
    hostId: () => stream.hostId(),
    admin: () => stream.admin(),
    icecastUrl: () => stream.localUrl(),
    pathOf: (serviceId, name) => media.pathOf(serviceId, name),
    autodj,
    included: includedStorageOf(() => live.current.catalog.products),
    graceHours: () => live.current.catalog.settings.extensions?.grace_hours ?? 24,
    gapSeconds: config.streaming.recording.gapSeconds,
    cleanupIntervalMs: config.streaming.recording.cleanupIntervalSeconds * 1000,
  });
}

/**
 * What the API reads and writes of media and now playing, on the main pool: with both roles in one process, its
 * requests neither wait for the host's connections (taken by its passes and Icecast's callbacks) nor fail when
 * those are cut. Storage reservations of uploads are rows (upload_reservations), counted the same from any instance;
 * only the API uploads (the host's AutoDJ lists and reads files), so the probe slots in memory are the API's alone.
 */
function apiParts(
  base: Foundation,
  hostDb: Database,
  hostSide: { media: MediaLibrary; nowPlaying: NowPlaying },
  titlesSent: Map<string, string>,
) {
  const { config, db, stream } = base;
  if (hostDb === db || config.role === 'host') return hostSide;
  return {
    media: new MediaLibrary(db, config.mediaDir, config.uploads),
    nowPlaying: new NowPlaying(db, { admin: () => stream.admin(), titlesSent }),
  };
}

/**
 * The connections of this host's own work: its passes, Icecast's callbacks, AutoDJ, relays, HLS. Each query is
 * bounded (HOST_QUERY_TIMEOUT_MS) and one that runs out closes its connection: after a partition to PostgreSQL
 * ends, a connection left silent fails one pass, which is logged, and the next runs on a new one. An instance that
 * runs no Icecast uses the main pool.
 */
function hostDatabase(base: Foundation): Database {
  if (!hosting(base)) return base.db;
  const timeoutMs = base.config.streaming.queryTimeoutMs;
  const hostDb = new Database(base.db.url, { max: 10, timeoutMs, name: 'agent-audio host work' });
  base.shutdown.push(() => hostDb.close());
  return hostDb;
}
export type StreamingParts = ReturnType<typeof streamingParts>;
