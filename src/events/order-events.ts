import type { NewEvent } from './event-log.js';

interface PaidOrder {
  id: string;
  api_key_id: string;
  product_id: string;
  amount_atomic: string;
  network: string;
  asset: string;
  payer: string;
  upgrade_of: string | null;
  extension_of?: string | null;
  retention_of?: string | null;
  configuration?: Record<string, unknown>;
  settlement: Record<string, unknown> | null;
}

interface ProvisionedService {
  id: string;
  product_id: string;
  status: string;
  expires_at: Date | null;
  limits: Record<string, unknown>;
}

/** order.paid, with the transfer the chain proved; recorded in the statement that records the settlement. */
export function orderPaidEvent(order: PaidOrder): NewEvent {
  return {
    type: 'order.paid',
    orderId: order.id,
    apiKeyId: order.api_key_id,
    ...(serviceOf(order) && { serviceId: serviceOf(order)! }),
    data: {
      product_id: order.product_id,
      amount_atomic: order.amount_atomic,
      network: order.network,
      asset: order.asset,
      payer: order.payer,
      transaction: order.settlement?.transaction ?? null,
      upgrade_of: order.upgrade_of,
      ...(order.extension_of && {
        extension_of: order.extension_of,
        duration_hours: order.configuration?.duration_hours,
      }),
      ...(order.retention_of && { retention_of: order.retention_of }),
    },
  };
}

/** The service an upgrade, extension or retention changes (none for a new service's order). */
const serviceOf = (order: Pick<PaidOrder, 'upgrade_of' | 'extension_of' | 'retention_of'>) =>
  order.upgrade_of ?? order.extension_of ?? order.retention_of;

/**
 * service.active for a new service, upgrade.applied for an upgrade, service.extended for an extension (with the
 * hours added), recordings.retained for a retention (the recordings and days); recorded in the statement that
 * activates the order.
 */
export function provisionedEvent(
  order: {
    id: string;
    upgrade_of: string | null;
    extension_of?: string | null;
    retention_of?: string | null;
    configuration?: Record<string, unknown>;
  },
  service: ProvisionedService,
): NewEvent {
  return {
    type: order.retention_of
      ? 'recordings.retained'
      : order.extension_of
        ? 'service.extended'
        : order.upgrade_of
          ? 'upgrade.applied'
          : 'service.active',
    serviceId: service.id,
    orderId: order.id,
    data: {
      status: service.status,
      product_id: service.product_id,
      expires_at: service.expires_at?.toISOString() ?? null,
      limits: service.limits,
      ...(order.extension_of && { added_hours: order.configuration?.duration_hours }),
      ...(order.retention_of && {
        retention_days: order.configuration?.retention_days,
        recording_ids: order.configuration?.recording_ids,
      }),
    },
  };
}
