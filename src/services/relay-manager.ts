import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../log/index.js';
import { mp3EncoderArgs } from '../provisioning/index.js';
import { policies, RefusedUrl, safeGet, type UrlPolicy } from '../ssrf/index.js';
import type { Database } from '../store/index.js';
import { recordServiceEvent } from './service-events.js';
import type { ServiceRow } from './service-records.js';
import { clearServiceReason, showServiceReason } from './service-transitions.js';

/** The source user a relay connects as. */
export const RELAY_USER = 'relay';

interface Relay {
  stopped: boolean;
  encoder?: ChildProcess;
  abort: AbortController;
  done: Promise<void>;
}

/** Where a service's run of upstream failures stands: kept when its relay stops, for the next one to go on from. */
interface Backoff {
  failures: number;
  /** When the next session may start (ms since epoch). */
  retryAt: number;
  /** The reason shown in the service record, cleared once a session runs well. */
  shown?: string;
}

/**
 * Relays of streaming-boost-relay services: the upstream is fetched through the service's URL policy (checked again
 * when connecting and on every redirect) and re-encoded at the bought bitrate into the service's mount.
 */
export class RelayManager {
  private readonly running = new Map<string, Relay>();
  /**
   * Per service, across restarts of its relay: the reconciler stops and starts relays (a lost lease, a move away and
   * back), and a restart must not reset the wait an upstream that keeps failing has earned.
   */
  private readonly backoffs = new Map<string, Backoff>();

  /** `firstRetryMs`: the wait after a first failure (RELAY_FIRST_RETRY_MS), doubling while failures go on. */
  constructor(
    private readonly db: Database,
    private readonly icecastUrl: () => string,
    private readonly log: Logger,
    private readonly firstRetryMs = FIRST_RETRY_MS,
  ) {}

  static wanted(service: ServiceRow): boolean {
    return service.status === 'active' && typeof service.limits.source_stream_url === 'string';
  }

  async sync(services: ServiceRow[]): Promise<void> {
    const wanted = new Map(services.filter(RelayManager.wanted).map((s) => [s.id, s]));
    for (const id of this.running.keys()) if (!wanted.has(id)) await this.stop(id);
    for (const [id, backoff] of this.backoffs)
      if (!wanted.has(id) && backoff.retryAt < Date.now() - MAX_RETRY_MS) this.backoffs.delete(id);
    for (const service of wanted.values()) if (!this.running.has(service.id)) this.start(service);
  }

  async stop(serviceId: string): Promise<void> {
    const relay = this.running.get(serviceId);
    if (!relay) return;
    this.running.delete(serviceId);
    this.log.info({ service_id: serviceId }, 'relay stopped');
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
    const failures = this.backoffs.get(service.id)?.failures ?? 0;
    this.log.info({ service_id: service.id, failures }, 'relay started');
    relay.done = this.loop(service, relay);
    this.running.set(service.id, relay);
  }

  /**
   * Connect, pump until the upstream or the mount ends, wait, connect again — until stopped. A session that fails or
   * ends quickly (an upstream that answers with undecodable bytes, refuses, or is not allowed) doubles the wait, from
   * 1 s (RELAY_FIRST_RETRY_MS) up to 5 min; the reason is shown in the service record until a session runs well again.
   */
  private async loop(service: ServiceRow, relay: Relay): Promise<void> {
    // The relay product's fulfillment names public_http_https_only, the one policy there is.
    const policy = policies.public_http_https_only();
    const url = String(service.limits.source_stream_url);
    while (!relay.stopped) {
      const waitMs = (this.backoffs.get(service.id)?.retryAt ?? 0) - Date.now();
      if (waitMs > 0) await sleep(waitMs, undefined, { signal: relay.abort.signal }).catch(() => {});
      if (relay.stopped) break;
      const { problem, refused } = await this.session(service, relay, url, policy);
      if (relay.stopped) break;
      await this.recordSession(service.id, url, problem, refused);
    }
  }

  /** One session: fetch the upstream and pump it into the mount until either ends. Says what went wrong, if it did. */
  private async session(
    service: ServiceRow,
    relay: Relay,
    url: string,
    policy: UrlPolicy,
  ): Promise<{ problem?: string; refused: boolean }> {
    const began = Date.now();
    try {
      const upstream = await safeGet(url, policy);
      if ((upstream.statusCode ?? 0) >= 300) {
        upstream.destroy();
        throw new Error(`the upstream answered HTTP ${upstream.statusCode}`);
      }
      const base = new URL(this.icecastUrl());
      const target = `icecast://${RELAY_USER}:${encodeURIComponent(service.source_password)}@${base.host}${service.mount}`;
      const encoder = spawn(
        'ffmpeg',
        [
          '-nostdin',
          '-loglevel',
          'error',
          '-i',
          'pipe:0',
          '-vn',
          ...mp3EncoderArgs(Number(service.limits.bitrate_kbps ?? 128)),
          // detached: out of the terminal's process group, so Ctrl-C reaches only serve, which stops it.
          '-content_type',
          'audio/mpeg',
          '-f',
          'mp3',
          target,
        ],
        { stdio: ['pipe', 'ignore', 'pipe'], detached: true },
      );
      relay.encoder = encoder;
      let errors = '';
      encoder.stderr!.on('data', (chunk: Buffer) => {
        errors = (errors + chunk.toString()).slice(-400);
      });
      upstream.pipe(encoder.stdin!);
      encoder.stdin!.on('error', () => upstream.destroy());
      this.log.info({ service_id: service.id }, 'relay connected');
      const code = await new Promise<number | null>((resolve) => encoder.on('exit', (exitCode) => resolve(exitCode)));
      upstream.destroy();
      if (Date.now() - began >= HEALTHY_SESSION_MS) return { refused: false };
      const said = lastLine(errors);
      const problem =
        code === 0
          ? 'the upstream ended its stream within seconds'
          : `its audio could not be decoded or relayed${said ? ` (ffmpeg: ${said})` : ''}`;
      return { problem, refused: false };
    } catch (err) {
      const problem = (err as Error).message;
      if (!(err instanceof RefusedUrl)) return { problem, refused: false };
      await recordServiceEvent(this.db, {
        serviceId: service.id,
        kind: 'enforce',
        code: 'relay_url_refused',
        reason: problem,
      }).catch(() => {});
      return { problem, refused: true };
    }
  }

  /** After a session: a failure doubles the wait and says why in the service record; a good session clears both. */
  private async recordSession(serviceId: string, url: string, problem?: string, refused = false): Promise<void> {
    const before = this.backoffs.get(serviceId);
    if (!problem) {
      this.backoffs.set(serviceId, { failures: 0, retryAt: Date.now() + this.firstRetryMs });
      if (before?.shown) await clearServiceReason(this.db, serviceId, before.shown).catch(() => {});
      return;
    }
    const failures = (before?.failures ?? 0) + 1;
    const delay = Math.max(refused ? 30_000 : 0, Math.min(MAX_RETRY_MS, this.firstRetryMs * 2 ** (failures - 1)));
    this.log.warn(
      { service_id: serviceId, problem, retry_in_ms: delay },
      refused ? 'relay upstream refused by the URL policy' : 'relay upstream failed',
    );
    const shown = `The relay could not use ${url}: ${problem}. Retrying in ${Math.ceil(delay / 1000)} s (attempt ${failures}; the wait doubles up to ${MAX_RETRY_MS / 60_000} min while it keeps failing).`;
    this.backoffs.set(serviceId, { failures, retryAt: Date.now() + delay, shown });
    await this.showReason(serviceId, shown, failures === 1);
  }

  /** The reason in the service record (GET /services/{id}); the first failure of a run also goes to its events. */
  private async showReason(serviceId: string, reason: string, firstFailure: boolean): Promise<void> {
    try {
      await showServiceReason(this.db, serviceId, reason, 'active');
      if (firstFailure)
        await recordServiceEvent(this.db, { serviceId, kind: 'enforce', code: 'relay_upstream_failed', reason });
    } catch (err) {
      this.log.warn({ service_id: serviceId, err }, 'could not record the relay failure');
    }
  }
}

/** A relay session that lasted this long was working: the next retry is quick again. */
const HEALTHY_SESSION_MS = 30_000;
const FIRST_RETRY_MS = 1000;
const MAX_RETRY_MS = 5 * 60_000;

function lastLine(text: string): string {
  return (
    text
      .trim()
      .split('\n')
      .pop()
      ?.replace(/[^\x20-\x7e]/g, ' ')
      .trim()
      .slice(0, 160) ?? ''
  );
}
