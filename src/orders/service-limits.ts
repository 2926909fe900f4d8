import type { Product } from '../catalog/index.js';
import { listenerCapOf, type ServiceRow, type StreamLoad } from '../services/index.js';

/**
 * The limits a paid order's service gets: a subscription's from its product, otherwise the bought configuration, with
 * the AutoDJ its product includes (hasAutoDj reads it there).
 */
export function serviceLimitsOf(
  product: Product | undefined,
  configuration: Record<string, unknown>,
): Record<string, unknown> {
  const limits = product?.billing_type === 'subscription' ? { ...product.limits } : { ...configuration };
  if (product?.limits.autodj === true) limits.autodj = true;
  if (limits.autodj === true && limits.storage_mb === undefined && product?.limits.autodj_storage_mb !== undefined)
    limits.storage_mb = product.limits.autodj_storage_mb;
  return limits;
}

/** What an order adds to its Icecast: a new stream, or the extra listener places of one that replaces `replaces`. */
export function streamLoadOf(limits: Record<string, unknown>, replaces?: Pick<ServiceRow, 'limits'>): StreamLoad {
  if (!replaces) return { sources: 1, listeners: listenerCapOf(limits) };
  return { sources: 0, listeners: Math.max(0, listenerCapOf(limits) - listenerCapOf(replaces.limits)) };
}
