import { hostPoolReport, type HostLease } from '../../hosts/index.js';
import type { Database } from '../../store/index.js';
import { cachedProbe } from '../cached-probe.js';
import { refundHealth } from './refund-health.js';
import type { Foundation } from './foundation.js';

/**
 * How long GET /health answers the chain's state from its last probe (unauthenticated: a flood must not reach the RPC).
 */
const HEALTH_CHAIN_PROBE_MS = 5000;

/**
 * GET /health's checks: the database, the chain (from a probe a few seconds old at most), in production the
 * facilitators and whether refunds can be sent, this instance's Icecast (when it runs one) and the pool's hosts (ok
 * when one at least is live and up).
 */
export function healthCheck(base: Foundation, lease?: HostLease) {
  const { db, pay, stream, config } = base;
  const chainProbe =
    pay.ledger &&
    cachedProbe(HEALTH_CHAIN_PROBE_MS, () =>
      timed(() => pay.ledger!.latestBlock().then((block) => ({ block: String(block) }))),
    );
  const wallet = pay.refunds.wallet;
  const refunds = config.production && config.payments.rpcUrl && wallet && refundHealth(config.payments.rpcUrl, wallet);
  return async () => ({
    ...(await checkDatabase(db)),
    ...(chainProbe && { chain: await chainProbe() }),
    ...(pay.facilitatorHealth && { facilitator: await pay.facilitatorHealth() }),
    ...(refunds && { refunds: await refunds() }),
    // Production without its X402_* settings: quotes work, nothing can be paid.
    ...(config.production && !pay.checkout.configured && { payments: { ok: false, error: pay.checkout.reason } }),
    ...(config.role !== 'api' && { icecast: await stream.health() }),
    hosts: await hostsCheck(db, config.streaming.downAfterSeconds, lease && { id: stream.hostId(), lease }),
  });
}

/**
 * The pool's hosts by name, and this host's lease (from memory: shown even when PostgreSQL does not answer); ok when
 * one host at least takes new streams and this one, if it is a host, holds its lease.
 */
async function hostsCheck(db: Database, downAfterSeconds: number, self?: { id: string; lease: HostLease }) {
  const report = await timed(async () => ({ hosts: await hostPoolReport(db, downAfterSeconds) }));
  const checked = self ? { ...report, this_host: { id: self.id, lease: self.lease.state() } } : report;
  const hosts = (checked.hosts ?? []) as Awaited<ReturnType<typeof hostPoolReport>>;
  if (self && !self.lease.held) {
    const error = `this streaming host (${self.id}) lost its lease (no heartbeat written): it serves nothing`;
    return { ...checked, ok: false, error };
  }
  if (!checked.ok || hosts.some((h) => h.live && h.state === 'up')) return checked;
  return { ...checked, ok: false, error: 'no streaming host is live and up: nothing new can be sold' };
}

async function checkDatabase(db: Database) {
  return { database: await timed(() => db.query('SELECT 1').then(() => ({}))) };
}

/** A dependency check: ok and how long it took, or the error it gave. */
async function timed(
  check: () => Promise<Record<string, unknown>>,
): Promise<{ ok: boolean } & Record<string, unknown>> {
  const started = performance.now();
  try {
    const details = await Promise.race([
      check(),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no answer within 2 s')), 2000).unref()),
    ]);
    return { ok: true, latency_ms: Math.round((performance.now() - started) * 100) / 100, ...details };
  } catch (e) {
    return { ok: false, error: (e as Error).message };
  }
}
