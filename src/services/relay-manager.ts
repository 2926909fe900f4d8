import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../log/index.js';
import { mp3EncoderArgs } from '../provisioning/index.js';
import { policies, RefusedUrl, safeGet } from '../ssrf/index.js';
import type { Database } from '../store/index.js';
import type { ServiceRow } from './service-records.js';

/** The source user a relay connects as. */
export const RELAY_USER = 'relay';

interface Relay { stopped: boolean; encoder?: ChildProcess; abort: AbortController; done: Promise<void> }

/**
 * Relays of streaming-boost-relay services: the upstream is fetched through the service's URL policy (checked again
 * when connecting and on every redirect) and re-encoded at the bought bitrate into the service's mount.
 */
export class RelayManager {
  private readonly running = new Map<string, Relay>();

  constructor(private readonly db: Database, private readonly icecastUrl: () => string, private readonly log: Logger) {}

  static wanted(service: ServiceRow): boolean {
    return service.status === 'active' && typeof service.limits.source_stream_url === 'string';
  }

  async sync(services: ServiceRow[]): Promise<void> {
    const wanted = new Map(services.filter(RelayManager.wanted).map((s) => [s.id, s]));
    for (const id of this.running.keys()) if (!wanted.has(id)) await this.stop(id);
    for (const service of wanted.values()) if (!this.running.has(service.id)) this.start(service);
  }

  async stop(serviceId: string): Promise<void> {
    const relay = this.running.get(serviceId);
    if (!relay) return;
    this.running.delete(serviceId);
    relay.stopped = true;
    relay.abort.abort();
    relay.encoder?.kill('SIGKILL');
    await relay.done;
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.running.keys()].map((id) => this.stop(id)));
  }

  private start(service: ServiceRow): void {
    const relay: Relay = { stopped: false, abort: new AbortController(), done: Promise.resolve() };
    relay.done = this.loop(service, relay);
    this.running.set(service.id, relay);
  }

  /** Connect, pump until the upstream or the mount ends, wait, connect again — until stopped. */
  private async loop(service: ServiceRow, relay: Relay): Promise<void> {
    // The relay product's fulfillment names public_http_https_only, the one policy there is.
    const policy = policies.public_http_https_only();
    let delay = 500;
    while (!relay.stopped) {
      try {
        const upstream = await safeGet(String(service.limits.source_stream_url), policy);
        if ((upstream.statusCode ?? 0) >= 300) throw new Error(`the upstream answered ${upstream.statusCode}`);
        const base = new URL(this.icecastUrl());
        const target = `icecast://${RELAY_USER}:${encodeURIComponent(service.source_password)}@${base.host}${service.mount}`;
        const encoder = spawn('ffmpeg', ['-nostdin', '-loglevel', 'error', '-i', 'pipe:0', '-vn', ...mp3EncoderArgs(Number(service.limits.bitrate_kbps ?? 128)),
          '-content_type', 'audio/mpeg', '-f', 'mp3', target], { stdio: ['pipe', 'ignore', 'pipe'] });
        relay.encoder = encoder;
        upstream.pipe(encoder.stdin!);
        encoder.stdin!.on('error', () => upstream.destroy());
        this.log.info({ service_id: service.id }, 'relay connected');
        await new Promise<void>((resolve) => encoder.on('exit', () => resolve()));
        upstream.destroy();
        delay = 500;
      } catch (err) {
        const refused = err instanceof RefusedUrl;
        this.log.warn({ service_id: service.id, err }, refused ? 'relay upstream refused by the URL policy' : 'relay upstream failed');
        if (refused) {
          await this.db.query('INSERT INTO service_events (service_id, kind, code, reason) VALUES ($1, $2, $3, $4)',
            [service.id, 'enforce', 'relay_url_refused', (err as Error).message]).catch(() => {});
          delay = 30_000;
        }
      }
      if (relay.stopped) break;
      await sleep(delay, undefined, { signal: relay.abort.signal }).catch(() => {});
      delay = Math.min(delay * 2, 30_000);
    }
  }
}
