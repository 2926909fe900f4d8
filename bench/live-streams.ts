import { setTimeout as sleep } from 'node:timers/promises';
import { roomyCatalog, startService, type Service } from '../test/support/service.js';
import { buyStreams, type BoughtStream } from './bought-streams.js';
import { startMp3Sources, type Sources } from './mp3-sources.js';
import { drain, waitLive } from './streaming.js';

export interface LiveStreams {
  service: Service;
  bought: BoughtStream[];
  sources: Sources;
  /** The service's own origin (its /metrics), for the callback counts. */
  origin: string;
  stop(): Promise<void>;
}

/**
 * A service with room for `count` instant-streams of `places` listener places, the streams bought, a source on each,
 * every one live and the callbacks of the probes that found it so answered: what a listener burst starts from.
 */
export async function liveStreams(
  root: string,
  shape: { count: number; places: number; kbps: number; env?: Record<string, string> },
  signal: AbortSignal,
): Promise<LiveStreams> {
  const service = await startService({
    ...shape.env,
    RATE_LIMIT_PER_IP: '0',
    RATE_LIMIT_PER_KEY: '0',
    ICECAST_MAX_SOURCES: String(shape.count + 10),
    ICECAST_MAX_LISTENERS: String(shape.count * shape.places + 500),
    ...(await roomyCatalog()),
  });
  let sources: Sources | undefined;
  try {
    const origin = new URL(service.metricsUrl).origin;
    const bought = await buyStreams(service, shape);
    sources = await startMp3Sources(
      root,
      bought.map((b) => b.broadcast_url),
      shape.kbps,
    );
    await Promise.all(bought.map((b) => waitLive(b.stream_url, signal)));
    await sleep(2000); // the probes' listener_remove
    await drain(origin, signal);
    const started = sources;
    const stop = async () => {
      await started.stop();
      await service.stop();
    };
    return { service, bought, sources, origin, stop };
  } catch (e) {
    await sources?.stop();
    await service.stop();
    throw e;
  }
}
