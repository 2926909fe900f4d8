import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Logger } from '../log/index.js';
import {
  HAPROXY_SOURCE_ADDRESS,
  ICECAST_PROXY_ADDRESSES,
  HaproxySupervisor,
  IcecastFrontDoor,
  IcecastSupervisor,
  installed,
  type ForwardedClaim,
  type IcecastAdmin,
} from '../provisioning/index.js';
import type { ListenerEnd, ListenerEndListener } from '../provisioning/listener-end.js';
import type {
  SourceEnd,
  SourceEndListener,
  SourcePresence,
  SourcePresenceListener,
} from '../provisioning/source-end.js';
import { allowTraversal } from '../store/index.js';
import { mkdir } from 'node:fs/promises';
import type { StreamingSettings } from './config.js';
import { loadStreamingHost, rememberStreamingHost } from './streaming-host.js';
import { streamingProxy } from './streaming-proxy.js';

export interface Streaming {
  available: boolean;
  reason?: string;
  /** What Icecast is configured to carry; placement counts on it (src/hosts/placement.ts). */
  limits: { sources: number; listeners: number };
  callbackCredentials: { user: string; password: string };
  publicUrl(): string;
  /** Icecast's own loopback address (for our readers of the mounts), undefined until it runs. */
  localUrl(): string | undefined;
  /**
   * Where serve's own sources (AutoDJ, relays) connect: Icecast itself, or HAProxy when it decides sources (Icecast
   * then takes no other source credentials than its own), undefined until it runs.
   */
  sourceUrl(): string | undefined;
  /** A listener's real address, from the front door's ticket in its callback credentials (see provisioning). */
  claimForwarded(user: string, pass: string): ForwardedClaim;
  /** This Icecast's stable identity (STREAMING_HOST_ID, or kept in DATA_DIR); services belong to it. */
  hostId(): string;
  admin(): IcecastAdmin | undefined;
  accessLogPath(): string | undefined;
  /** Calls `listener` with the exact bytes of each source connection the proxy carried, when it closes. */
  onSourceEnd(listener: SourceEndListener): void;
  /** Calls `listener` with the bytes the proxy sent each listener, when it closes (HAProxy only). */
  onListenerEnd(listener: ListenerEndListener): void;
  /** Calls `listener` when Icecast took a source HAProxy let in, and when it left (HAProxy only: Icecast's mount_add). */
  onSourcePresence(listener: SourcePresenceListener): void;
  /** Whether Icecast answers its admin API now. */
  health(): Promise<{ ok: boolean; error?: string; url?: string }>;
  /** Starts Icecast once the HTTP server that answers its callbacks is listening. */
  start(callbackBaseUrl: string): Promise<void>;
  stop(): Promise<void>;
}

/** The Icecast data plane, supervised by serve; unavailable (with the reason) when icecast2 is not installed. */
export function streaming(dataDir: string, log: Logger, settings: StreamingSettings): Streaming {
  const callbackCredentials = { user: 'icecast', password: randomBytes(18).toString('base64url') };
  const icecastInstalled = installed('icecast2');
  const limits = { sources: settings.maxSources, listeners: settings.maxListeners };
  const host = loadStreamingHost(dataDir, settings.hostId);
  let supervisor: IcecastSupervisor | undefined;
  let frontDoor: IcecastFrontDoor | undefined;
  let haproxy: HaproxySupervisor | undefined;
  // ICECAST_PROXY=haproxy puts HAProxy where the front door would be (config refuses ICECAST_FRONT_DOOR=false with it).
  const proxied = settings.proxy === 'haproxy' || settings.frontDoor;
  const publicPort = () => haproxy?.port ?? frontDoor?.port ?? supervisor?.port;
  const sourceEnds = fanOut<SourceEnd>();
  const listenerEnds = fanOut<ListenerEnd>();
  const sourcePresence = fanOut<SourcePresence>();
  const sourceEnded = sourceEnds.emit;
  const ends = { sourceEnded, listenerEnded: listenerEnds.emit, sourcePresence: sourcePresence.emit };
  // HAProxy decides sources: an admitted one reaches Icecast with this password in place of the buyer's.
  const icecastSourcePassword = settings.proxy === 'haproxy' ? randomBytes(24).toString('base64url') : undefined;
  return {
    available: icecastInstalled,
    reason: icecastInstalled ? undefined : 'icecast2 is not installed (run npm run setup)',
    limits,
    callbackCredentials,
    publicUrl: () => settings.publicUrl ?? `http://${reachableHost(settings.listen?.host)}:${publicPort() ?? 0}`,
    localUrl: () => supervisor?.baseUrl,
    sourceUrl: () => (haproxy ? `http://${reachableHost(settings.listen?.host)}:${haproxy.port}` : supervisor?.baseUrl),
    claimForwarded: (user, pass) => (haproxy ?? frontDoor)?.claim(user, pass),
    hostId: () => host.id,
    admin: () => supervisor?.admin,
    accessLogPath: () => supervisor?.accessLogPath,
    onSourceEnd: sourceEnds.add,
    onListenerEnd: listenerEnds.add,
    onSourcePresence: sourcePresence.add,
    health: () =>
      icecastHealth(supervisor, icecastInstalled, { proxy: streamingProxy(settings), public_port: publicPort() }),
    async start(callbackBaseUrl) {
      if (!icecastInstalled) return;
      await mkdir(dataDir, { recursive: true });
      await allowTraversal(dataDir);
      // Icecast counts sources, listeners and our own admin requests as clients.
      supervisor = new IcecastSupervisor({
        dataDir: join(dataDir, 'icecast'),
        callbackBaseUrl,
        callbackAuth: callbackCredentials,
        maxSources: limits.sources,
        maxClients: limits.sources + limits.listeners + 50,
        // HAProxy asks serve about listeners and sources itself; Icecast takes connections only from it and serve.
        allowIps: settings.proxy === 'haproxy' ? ['127.0.0.1', HAPROXY_SOURCE_ADDRESS] : undefined,
        proxySourcePassword: icecastSourcePassword,
        moreAddresses: settings.proxy === 'haproxy' ? ICECAST_PROXY_ADDRESSES.slice(1) : undefined,
        // The same port as last time keeps every service's stream and broadcast address; when it is taken, the
        // addresses move with the host (services/streaming-hosts.ts). With the front door, that is its port.
        ...(!proxied && {
          host: settings.listen?.host,
          preferredPort: settings.listen?.port ?? host.lastPort,
        }),
      });
      logIcecastEvents(supervisor, log);
      await supervisor.start();
      if (settings.proxy === 'haproxy')
        haproxy = await startHaproxy(supervisor, host.lastPort, settings, dataDir, log, {
          ...ends,
          admission: { callbackBaseUrl, callbackAuth: callbackCredentials },
          icecastSourcePassword: icecastSourcePassword!,
        });
      else if (settings.frontDoor) frontDoor = await openFrontDoor(supervisor, host.lastPort, settings, sourceEnded);
      const port = publicPort()!;
      rememberStreamingHost(dataDir, host.id, port);
      logStarted(log, { url: supervisor.baseUrl, port, host, frontDoor: frontDoor?.port, haproxy: haproxy?.port });
    },
    async stop() {
      await frontDoor?.stop();
      await haproxy?.stop();
      await supervisor?.stop();
    },
  };
}

/** Listeners of one kind of end, called in the order they were added. */
function fanOut<T>(): { add(listener: (end: T) => void): void; emit(end: T): void } {
  const listeners: Array<(end: T) => void> = [];
  return {
    add: (listener) => void listeners.push(listener),
    emit: (end) => {
      for (const listener of listeners) listener(end);
    },
  };
}

function logStarted(
  log: Logger,
  started: { url: string; port: number; host: { id: string; lastPort?: number }; frontDoor?: number; haproxy?: number },
): void {
  const { url, port, host } = started;
  if (host.lastPort && host.lastPort !== port) {
    log.warn(
      { component: 'icecast', port, previous_port: host.lastPort },
      'the previous icecast port is taken; service addresses move to the new one',
    );
  }
  const ports = { front_door_port: started.frontDoor, haproxy_port: started.haproxy };
  log.info({ component: 'icecast', url, ...ports, host_id: host.id }, 'icecast started');
}

/** Whether Icecast answers its admin API, with what holds the public port in front of it. */
async function icecastHealth(
  supervisor: IcecastSupervisor | undefined,
  installed: boolean,
  front: { proxy: string; public_port?: number },
) {
  if (!supervisor) return { ok: false, error: installed ? 'not started' : 'icecast2 is not installed' };
  try {
    await supervisor.admin.listMounts();
    return { ok: true, url: supervisor.baseUrl, ...front };
  } catch (e) {
    return { ok: false, error: (e as Error).message };
  }
}

function logIcecastEvents(supervisor: IcecastSupervisor, log: Logger): void {
  supervisor.on('exited', ({ expected, ...e }) => {
    if (expected) log.debug?.({ component: 'icecast', ...e }, 'icecast stopped');
    else
      log.warn(
        { component: 'icecast', ...e },
        e.signal === 'SIGKILL' ? 'icecast killed (not by serve)' : 'icecast exited',
      );
  });
  supervisor.on('restarted', (e) =>
    log.info({ component: 'icecast', ...e }, 'icecast restarted; sources reconnect to their mounts'),
  );
  supervisor.on('restartFailed', (err) => log.error({ component: 'icecast', err }, 'icecast could not be restarted'));
}

/**
 * The front door at ICECAST_LISTEN (taken or not, that address is the operator's word), else on the previous run's
 * loopback port when it is free, else on any free loopback port.
 */
async function openFrontDoor(
  supervisor: IcecastSupervisor,
  preferredPort: number | undefined,
  settings: StreamingSettings,
  onSourceEnd: SourceEndListener,
): Promise<IcecastFrontDoor> {
  const upstream = () => (supervisor.port ? { host: '127.0.0.1', port: supervisor.port } : undefined);
  const inFlight = settings.frontDoorInFlight;
  if (settings.listen) {
    const door = new IcecastFrontDoor({ ...settings.listen, upstream, inFlight, onSourceEnd });
    await door.start().catch((e: NodeJS.ErrnoException) => {
      throw new Error(`ICECAST_LISTEN ${settings.listen!.host}:${settings.listen!.port} cannot be used: ${e.message}`);
    });
    return door;
  }
  for (const port of preferredPort ? [preferredPort, 0] : [0]) {
    const door = new IcecastFrontDoor({ host: '127.0.0.1', port, upstream, inFlight, onSourceEnd });
    try {
      await door.start();
      return door;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE' || port === 0) throw e;
    }
  }
  throw new Error('unreachable');
}

/**
 * HAProxy in the front door's place (src/provisioning/haproxy-config.ts): at ICECAST_LISTEN (used or the start fails),
 * else on the previous run's loopback port when it is free, else on any free loopback port.
 */
async function startHaproxy(
  supervisor: IcecastSupervisor,
  preferredPort: number | undefined,
  settings: StreamingSettings,
  dataDir: string,
  log: Logger,
  ends: {
    sourceEnded: SourceEndListener;
    listenerEnded: ListenerEndListener;
    sourcePresence: SourcePresenceListener;
    admission: { callbackBaseUrl: string; callbackAuth: { user: string; password: string } };
    icecastSourcePassword: string;
  },
): Promise<HaproxySupervisor> {
  const haproxy = new HaproxySupervisor({
    dataDir: join(dataDir, 'haproxy'),
    host: settings.listen?.host ?? '127.0.0.1',
    ...(settings.listen ? { port: settings.listen.port } : { preferredPort }),
    upstream: () =>
      supervisor.port ? { host: '127.0.0.1', port: supervisor.port, listenerHosts: supervisor.addresses } : undefined,
    icecastClients: settings.maxSources + settings.maxListeners + 50,
    admission: { ...ends.admission, timeoutMs: settings.listenerAdmissionTimeoutMs },
    icecastSourcePassword: ends.icecastSourcePassword,
    sourceAddress: HAPROXY_SOURCE_ADDRESS,
    onSourceEnd: ends.sourceEnded,
    onListenerEnd: ends.listenerEnded,
    onSourcePresence: ends.sourcePresence,
  });
  haproxy.on('exited', ({ expected, ...e }) => {
    if (expected) log.debug?.({ component: 'haproxy', ...e }, 'haproxy stopped');
    else log.warn({ component: 'haproxy', ...e }, 'haproxy exited; its listeners and sources were cut');
  });
  haproxy.on('restarted', (e) => log.info({ component: 'haproxy', ...e }, 'haproxy restarted'));
  haproxy.on('restartFailed', (err) => log.error({ component: 'haproxy', err }, 'haproxy could not be restarted'));
  await haproxy.start().catch((e: Error) => {
    if (!settings.listen) throw e;
    throw new Error(`ICECAST_LISTEN ${settings.listen.host}:${settings.listen.port} cannot be used: ${e.message}`);
  });
  return haproxy;
}

/** An address a listener on this machine can reach: a wildcard listen address is reached on loopback. */
function reachableHost(listenHost: string | undefined): string {
  if (!listenHost || listenHost === '0.0.0.0') return '127.0.0.1';
  if (listenHost === '::') return '[::1]';
  return listenHost.includes(':') ? `[${listenHost}]` : listenHost;
}
