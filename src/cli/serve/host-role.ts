import { withHlsUsage } from '../../hls/index.js';
import { createCallbackListener, ICECAST_CALLBACK_PREFIX } from '../../http/index.js';
import { beatStreamingHost, HostReconciler, registerStreamingHost, type HostLease } from '../../hosts/index.js';
import { extendHint } from '../../orders/index.js';
import { startCallbackServer } from '../../provisioning/index.js';
import { ownReaders } from '../../recordings/index.js';
import { IcecastDecider, IcecastUsageMeter, LifecycleWorker, releaseHostIcecastPlaces } from '../../services/index.js';
import { PeriodicTask } from '../../tasks/index.js';
import { Database } from '../../store/index.js';
import type { Events } from '../events.js';
import { hosting, type Foundation } from './foundation.js';
import type { StreamingParts } from './streaming-parts.js';

/** What decides this host's Icecast callbacks (sources, listeners), when it runs an Icecast. */
export function icecastDecider(base: Foundation, parts: StreamingParts, eventing: Events): IcecastDecider | undefined {
  const { log, live, stream } = base;
  if (!hosting(base)) return undefined;
  return new IcecastDecider({
    db: parts.hostDb,
    log,
    autodj: parts.autodj,
    sourceEvents: eventing.sourceEvents,
    catalog: live,
    internalReaders: ownReaders(parts.hls, parts.recorder),
    hostId: () => stream.hostId(),
    places: parts.places,
    forwarded: (user, pass) => stream.claimForwarded(user, pass),
    leaseLost: () => !parts.lease?.held,
  });
}

/** A host answers its own Icecast's callbacks, and nothing of the API. */
export function serveCallbacks({ http, stream }: Foundation, decider: IcecastDecider | undefined): void {
  if (!decider) throw new Error(`serve --role host needs its Icecast: ${stream.reason}`);
  http.serve(createCallbackListener(decider, stream.callbackCredentials));
}

/**
 * Icecast (its callbacks come to this server on loopback), this host's record, the life-cycle worker that enforces
 * what was bought and meters it, and the reconciler that runs on this host what PostgreSQL places on it.
 */
export async function startStreamingHost(
  base: Foundation,
  parts: StreamingParts,
  decider?: IcecastDecider,
): Promise<void> {
  const { config, log, live, stream, http, shutdown } = base;
  const presence = { stopping: false };
  if (decider) stream.onSourcePresence(sourcePresenceTo(decider, log, presence));
  if (stream.available) {
    // Its Icecast and proxy start afresh: no listener of the ones before is connected to them.
    const released = await releaseHostIcecastPlaces(parts.hostDb, stream.hostId());
    if (released) log.info({ released }, "listener places of serve's previous run freed");
  }
  await stream.start(await callbackBaseUrl(base, decider));
  const { hostDb: db, hls, autodj, relays, places, lease, titlesSent } = parts;
  if (stream.available && lease) await joinHostPool(base, lease);
  if (!(stream.available && hls)) return;
  await hls.start();
  shutdown.push(() => hls.stopAll());
  // HLS bytes are counted when a response has been sent: the last ones are saved once the HTTP server has closed.
  http.afterClose(() => hls.totals.save());
  if (places) {
    await places.start();
    shutdown.push(() => places.stop());
  }
  if (parts.recorder) {
    await parts.recorder.start();
    shutdown.push(() => parts.recorder!.stop());
  }
  const meter = usageMeter(base, parts);
  const worker = new LifecycleWorker({
    db,
    live,
    log,
    autodj,
    relays,
    hls,
    places,
    hostId: () => stream.hostId(),
    admin: () => stream.admin(),
    // The meter's state (meter_state.icecast_url) is keyed by the host id: it survives a change of address.
    meter: withHlsUsage(meter, hls.totals),
    icecastClients: () => meter.icecastClients(),
    intervalMs: config.lifecycleIntervalMs,
    expiringLeadSeconds: config.events.expiringLeadSeconds,
    extendHint: extendHint(live, () => http.publicBaseUrl),
  });
  worker.start();
  const reconciler = new HostReconciler({
    db,
    hostId: stream.hostId(),
    workers: {
      admin: () => stream.admin(),
      autodj,
      relays,
      sourceEpoch: (mount) => decider?.sourceEpoch(mount),
      leaseHeld: () => lease?.held ?? true,
      titlesSent,
    },
    log,
    intervalMs: config.streaming.reconcileIntervalMs,
  });
  if (lease)
    lease.onLost = () => {
      // Cut off long enough to be counted down: its services may have moved, their notifications lost on the way.
      places?.forget('lease lost');
      void reconciler.fence().catch((err) => log.warn({ err }, 'fencing failed'));
    };
  reconciler.start();
  shutdown.push(async () => {
    // The sources this stop cuts (AutoDJ's, relays') are not noted gone: the places' writer stops before HAProxy's
    // lines about them arrive (behind the front door, Icecast's mount_remove finds the callback server closed).
    presence.stopping = true;
    await reconciler.stop();
    await worker.stop();
    await meter.save().catch((err) => log.warn({ err }, 'could not save the usage meter'));
    await autodj.stopAll();
    await relays.stopAll();
  });
}

/**
 * A source HAProxy let in came or went: what Icecast's mount_add and mount_remove tell the decider otherwise, one at a
 * time per mount as Icecast's auth thread asked them (a source that comes and goes at once is noted in that order).
 */
function sourcePresenceTo(decider: IcecastDecider, log: Foundation['log'], host: { stopping: boolean }) {
  const queues = new Map<string, Promise<void>>();
  return ({ mount, present }: { mount: string; present: boolean }) => {
    const note = async () => {
      if (host.stopping) return;
      await (present ? decider.mountAdded({ mount }) : decider.mountRemoved({ mount }));
    };
    const done = (queues.get(mount) ?? Promise.resolve())
      .then(note)
      .catch((err) => log.warn({ err, mount }, `could not note the source ${present ? 'connected' : 'disconnected'}`))
      .finally(() => queues.get(mount) === done && queues.delete(mount));
    queues.set(mount, done);
  };
}

/** The host's usage meter, fed by the proxy's reports of sources and listeners that ended. */
function usageMeter({ config, log, stream }: Foundation, parts: StreamingParts): IcecastUsageMeter {
  const meter = new IcecastUsageMeter({
    db: parts.hostDb,
    icecastUrl: () => stream.hostId(),
    admin: () => stream.admin(),
    accessLogPath: () => stream.accessLogPath(),
    log,
    budget: config.streaming.sourceBudget,
    nowPlaying: parts.nowPlaying,
    internal: ownReaders(parts.hls, parts.recorder),
  });
  stream.onSourceEnd((end) => meter.sourceEnded(end));
  stream.onListenerEnd((end) => meter.listenerEnded(end));
  return meter;
}

/** Registers this host with what it carries and keeps its heartbeat (and with it its lease) while it runs. */
async function joinHostPool({ config, log, db, stream, shutdown }: Foundation, lease: HostLease): Promise<void> {
  const { maxSources, maxListeners, bandwidthKbps, heartbeatMs } = config.streaming;
  const id = stream.hostId();
  const publicUrl = stream.publicUrl();
  await lease.beat(() => registerStreamingHost(db, { id, publicUrl, maxSources, maxListeners, bandwidthKbps }));
  // The beats have a connection of their own, bounded in time: neither a pool taken up by queries hung in a
  // partition nor a beat hung on a silent connection keeps the host from taking its lease again once it heals.
  const beats = new Database(db.url, { max: 1, timeoutMs: lease.beatTimeoutMs, name: 'agent-audio host beats' });
  const beat = () => lease.beat(() => beatStreamingHost(beats, id));
  const heartbeat = new PeriodicTask('host heartbeat', beat, { intervalMs: heartbeatMs, log });
  heartbeat.start();
  shutdown.push(async () => {
    await heartbeat.stop();
    lease.stop();
    await beats.close();
  });
}

/**
 * Icecast's callbacks go to a bare HTTP server of their own on loopback, without the API's middleware (request log,
 * rate limits, body parsing): Icecast asks one callback at a time, so their cost is the host's admission rate.
 */
async function callbackBaseUrl({ log, http, shutdown, metrics, stream }: Foundation, decider?: IcecastDecider) {
  if (!decider) return `http://127.0.0.1:${http.port}${ICECAST_CALLBACK_PREFIX}`;
  const server = await startCallbackServer({
    decider,
    auth: stream.callbackCredentials,
    onError: (err) => log.error({ err }, 'icecast callback failed; Icecast refuses the client'),
    onAnswered: (action, seconds) => metrics.icecastCallbacks.labels(action).observe(seconds),
    onProxiedRefusal: (mount, reason) => log.info({ component: 'haproxy', mount, reason }, 'listener refused'),
  });
  shutdown.push(() => server.close());
  return server.url;
}
