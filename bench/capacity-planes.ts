/**
 * The data planes the listener-capacity benchmark compares, each carrying the same listeners of the same streams:
 * the anchor (Icecast alone, bench/bare-icecast.ts) and a host started as `serve` does it (ICECAST_PROXY=haproxy or
 * front-door: proxy, Icecast, serve's callbacks, PostgreSQL).
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { roomyCatalog, startService, type Service } from '../test/support/service.js';
import { startBareIcecast } from './bare-icecast.js';
import { buyStreams } from './bought-streams.js';
import type { ListenerFleet, Opened } from './listener-fleet.js';
import { type Burst, type CpuSampler, coresOver, type Held, holdListeners, summarizeBurst } from './listener-hold.js';
import { startMp3Sources } from './mp3-sources.js';
import { namedTreesCpu, treeCpu } from './process-cpu.js';
import { drain, waitLive } from './streaming.js';

export interface Shape {
  root: string;
  streams: number;
  places: number;
  kbps: number;
  holdSeconds: number;
  fleet: ListenerFleet;
  signal: AbortSignal;
}

export interface PlaneResult {
  plane: 'anchor' | 'haproxy' | 'front-door';
  /** % of one core per process group with the sources on and no listener. */
  idle: Record<string, number>;
  burst: Burst;
  /**
   * One more listener per stream, counted on the streams whose places were all admitted (full: must be refused) and
   * apart on the streams with a place left by a listener refused or unanswered (room: may be admitted); absent for the
   * anchor (no cap).
   */
  extra?: { admitted: number; tried: number; roomAdmitted: number; roomTried: number };
  held: Held;
  /** % of one core of every process of the data plane while the listeners are held. */
  hostCores: number;
  /** When more than 2,000 listeners were opened: a second burst of 2,000 alone, on the first streams. */
  burst2000?: Burst;
}

interface Streams {
  listen: string[];
  broadcast: string[];
}

interface Plane {
  cpu: CpuSampler;
  /** Waits until the plane has finished admitting (its callbacks stand still). */
  settle: () => Promise<void>;
  /** The plane caps each stream at its places (a host; not the anchor). */
  capped: boolean;
}

const IDLE_SECONDS = 10;
/** The second burst: 2,000 listeners at once, within 2 s. */
const SMALL_BURST = 2000;

/** Every place opened at once on `urls`, then closed again once all are answered. */
async function burstAlone(shape: Shape, plane: Plane, urls: string[]): Promise<Burst> {
  await shape.fleet.closeAll();
  await plane.settle();
  const burst = summarizeBurst(await shape.fleet.open(urls));
  await shape.fleet.closeAll();
  return burst;
}

/**
 * Sources on every stream, their idle cost; then every place opened at once; on a capped plane one more listener per
 * stream; then the hold; on a capped plane with more than 2,000 places, a burst of 2,000 alone.
 */
async function carry(shape: Shape, streams: Streams, plane: Plane): Promise<Omit<PlaneResult, 'plane' | 'hostCores'>> {
  const sources = await startMp3Sources(shape.root, streams.broadcast, shape.kbps);
  try {
    if (sources.refused) throw new Error(`${sources.refused} sources were refused`);
    // A few at a time: 200 probes at once overflow the anchor's listen backlog of 5 again and again.
    for (let i = 0; i < streams.listen.length; i += 10)
      await Promise.all(streams.listen.slice(i, i + 10).map((u) => waitLive(u, shape.signal)));
    await plane.settle();
    const idle = (await coresOver(plane.cpu, IDLE_SECONDS)).cores;
    const urls = streams.listen.flatMap((u) => Array(shape.places).fill(u));
    const opened = await shape.fleet.open(urls);
    const burst = summarizeBurst(opened);
    await plane.settle();
    let extra: PlaneResult['extra'];
    if (plane.capped) {
      extra = oneMore(opened, await shape.fleet.open(streams.listen), shape.places);
      await plane.settle();
    }
    const held = await holdListeners(shape.fleet, opened, shape.holdSeconds, shape.kbps * 125, plane.cpu);
    const burst2000 =
      plane.capped && urls.length > SMALL_BURST
        ? await burstAlone(shape, plane, urls.slice(0, SMALL_BURST))
        : undefined;
    return { idle, burst, extra, held, burst2000 };
  } finally {
    await shape.fleet.closeAll();
    await sources.stop();
  }
}

/** The extra listeners' answers split by whether their stream was full (`opened` holds `places` answers a stream). */
function oneMore(opened: Opened, more: Opened, places: number): NonNullable<PlaneResult['extra']> {
  const full = (stream: number) =>
    opened.answers.slice(stream * places, (stream + 1) * places).every((a) => a.status === 200);
  const extra = { admitted: 0, tried: 0, roomAdmitted: 0, roomTried: 0 };
  more.answers.forEach((answer, stream) => {
    const admitted = answer.status === 200 ? 1 : 0;
    if (full(stream)) {
      extra.tried++;
      extra.admitted += admitted;
    } else {
      extra.roomTried++;
      extra.roomAdmitted += admitted;
    }
  });
  return extra;
}

export async function measureAnchor(shape: Shape): Promise<PlaneResult> {
  const listeners = shape.streams * shape.places;
  const icecast = await startBareIcecast(listeners + shape.streams + 550, shape.streams + 10);
  try {
    const mounts = Array.from({ length: shape.streams }, (_, i) => `/anchor-${i}.mp3`);
    const streams = { listen: mounts.map(icecast.listenUrl), broadcast: mounts.map(icecast.broadcastUrl) };
    const cpu = async () => ({ icecast: (await treeCpu(icecast.pid))?.self ?? Number.NaN });
    const carried = await carry(shape, streams, { cpu, settle: () => sleep(2000), capped: false });
    return { plane: 'anchor', ...carried, hostCores: carried.held.cores.icecast };
  } finally {
    await icecast.stop();
  }
}

/** serve, its proxy, Icecast, PostgreSQL and the nginx of its HLS segments; the dev chain (anvil) is no host's. */
export function hostCpu(pid: number): CpuSampler {
  return async () => {
    const serve = (await treeCpu(pid))?.self ?? Number.NaN;
    const proxy = (await namedTreesCpu(pid, ['haproxy'])) ?? 0;
    const icecast = (await namedTreesCpu(pid, ['icecast2'])) ?? Number.NaN;
    const postgres = (await namedTreesCpu(pid, ['postgres'])) ?? Number.NaN;
    const nginx = (await namedTreesCpu(pid, ['nginx'])) ?? 0;
    return { serve, proxy, icecast, postgres, nginx, host: serve + proxy + icecast + postgres + nginx };
  };
}

async function boughtStreams(service: Service, shape: Shape): Promise<Streams> {
  const bought = await buyStreams(service, { count: shape.streams, places: shape.places, kbps: shape.kbps });
  return { listen: bought.map((b) => b.stream_url), broadcast: bought.map((b) => b.broadcast_url) };
}

export async function measureHost(shape: Shape, plane: 'haproxy' | 'front-door'): Promise<PlaneResult> {
  let service: Service | undefined;
  try {
    service = await startService({
      ICECAST_PROXY: plane,
      RATE_LIMIT_PER_IP: '0',
      RATE_LIMIT_PER_KEY: '0',
      ICECAST_MAX_SOURCES: String(shape.streams + 10),
      ICECAST_MAX_LISTENERS: String(shape.streams * shape.places + 500),
      ...(await roomyCatalog()),
    });
    const origin = new URL(service.metricsUrl).origin;
    console.error(`[listener-capacity] ${plane}: buying ${shape.streams} instant-streams of ${shape.places} places`);
    const streams = await boughtStreams(service, shape);
    const settle = async () => {
      await sleep(2000); // the listener_removes of the probes before
      await drain(origin, shape.signal);
    };
    const carried = await carry(shape, streams, { cpu: hostCpu(service.process.pid!), settle, capped: true });
    return { plane, ...carried, hostCores: carried.held.cores.host };
  } finally {
    if (service && process.env.LISTENER_CAPACITY_LOG_DIR)
      await writeFile(
        join(process.env.LISTENER_CAPACITY_LOG_DIR, `serve-${plane}-${Date.now()}.log`),
        service.output(),
      );
    await service?.stop();
  }
}
