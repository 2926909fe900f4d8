import type Router from '@koa/router';
import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import type { Callers } from '../identity/index.js';
import type { ApiKeys } from '../keys/index.js';
import type { ListenerSessions, ServiceRecords, ServiceRow } from '../services/index.js';
import { serviceStats, statsCsv, statsRange, type ServiceStats } from '../stats/index.js';
import { ownedServiceOf } from './owned-service.js';

export interface ServiceStatsDeps {
  keys: ApiKeys;
  services?: ServiceRecords;
  callers?: Callers;
  listenerSessions?: ListenerSessions;
  publicBaseUrl: () => string;
}

/**
 * A service's listener statistics per UTC day, for its owner (API key or paying wallet): as JSON, and as CSV for a
 * spreadsheet (GET …/stats.csv, or ?format=csv).
 */
export function serviceStatsRoutes(router: Router, deps: ServiceStatsDeps): void {
  router.get('/services/:service_id/stats', async (ctx) => {
    const format = ctx.query.format;
    if (format !== undefined && format !== 'json' && format !== 'csv')
      throw new ApiError(400, 'invalid_stats_query', 'format must be json or csv.');
    const { service, stats } = await statsOf(ctx, deps);
    if (format === 'csv') return sendCsv(ctx, service, stats);
    ctx.body = { ok: true, stats: { ...stats, links: linksOf(deps, service, stats) } };
  });

  router.get('/services/:service_id/stats.csv', async (ctx) => {
    const { service, stats } = await statsOf(ctx, deps);
    sendCsv(ctx, service, stats);
  });
}

async function statsOf(ctx: Context, deps: ServiceStatsDeps) {
  const service = await ownedServiceOf(ctx, deps);
  const range = statsRange(ctx.query);
  if (!deps.listenerSessions) {
    throw new ApiError(
      503,
      'not_available',
      'Listener statistics are not available on this deployment (streaming is off). Check GET /api/v1/availability.',
      { retryable: true },
    );
  }
  return { service, stats: await serviceStats(deps.listenerSessions.db, service.id, range) };
}

function linksOf(deps: ServiceStatsDeps, service: ServiceRow, stats: ServiceStats) {
  const base = `${deps.publicBaseUrl()}/services/${service.id}`;
  return { csv: `${base}/stats.csv?from=${stats.from}&to=${stats.to}`, usage: `${base}/usage` };
}

function sendCsv(ctx: Context, service: ServiceRow, stats: ServiceStats): void {
  ctx.type = 'text/csv; charset=utf-8; header=present';
  ctx.set('Content-Disposition', `attachment; filename="stats-${service.id}-${stats.from}-${stats.to}.csv"`);
  ctx.body = statsCsv(stats);
}
