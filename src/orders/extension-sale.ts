import { canonicalJson, extensionRecord } from '../audit/index.js';
import { ApiError } from '../errors/index.js';
import type { Snapshot } from '../pricing/index.js';
import { atomicToAmount } from '../rules/index.js';
import type { ServiceRow } from '../services/index.js';
import type { Client } from '../store/index.js';
import { checkExtensible, priceExtension } from './extension-price.js';
import { refuseWhileOtherPaid } from './other-sale-in-flight.js';
import type { Demand, PricedSale, PricingContext, Provisioning, SaleKind } from './sale-kind.js';
import { streamLoadOf } from './service-limits.js';

/** More paid hours for a service, or an expired one brought back within its grace period; it stays on its host. */
export class ExtensionSale implements SaleKind {
  readonly request: { extension_of: string; duration_hours: number };
  readonly changes: { upgrade_of: null; extension_of: string };
  readonly newStream = false;

  constructor(
    private readonly service: ServiceRow,
    hours: number,
  ) {
    this.request = { extension_of: service.id, duration_hours: hours };
    this.changes = { upgrade_of: null, extension_of: service.id };
  }

  async price({ snapshot }: PricingContext): Promise<PricedSale> {
    const extension = await priceExtension(snapshot, this.service, this.request.duration_hours);
    const { priced, amountAtomic, input } = extension;
    const product = `${priced.product.name} (${priced.product.id})`;
    return {
      priced,
      amountAtomic,
      billing: 'one_time',
      // An extension's order carries its own hours only; the service keeps its limits.
      configuration: { duration_hours: input.extend_hours },
      description: `${input.extend_hours} more hours of ${product} for ${atomicToAmount(amountAtomic, 6)} USDC`,
      evidence: (id, snapshotHash, at) => extensionRecord(id, snapshotHash, input, extension.evaluation, at),
    };
  }

  /** An expired service comes back on its Icecast (a stream again); otherwise an extension adds nothing there. */
  demand(): Demand {
    const { service } = this;
    const load = service.status === 'expired' ? streamLoadOf(service.limits) : { sources: 0, listeners: 0 };
    return { load, ...(service.host_id && { ownHost: service.host_id }) };
  }

  stillFits(client: Client, snapshot: Snapshot): Promise<void> {
    return extensionStillFits(client, snapshot, this.service);
  }
}

/** An extension adds its hours to its service's paid time once paid. */
export const extensionProvisioning: Provisioning = {
  newStream: false,
  serviceOf: (order) => order.extension_of ?? undefined,
  apply: (client, order, services) =>
    services.applyExtension(client, order.extension_of!, order.id, Number(order.configuration.duration_hours)),
};

/**
 * An extension was priced on the product, limits and hours the service had then; under the service's row lock at
 * claim time it must still have them, and must still be extensible: a stop (with its refund) that got there first
 * refuses it here, before any money moves, and a stop that comes later waits for this order's lock and sees it. An
 * upgrade claimed but not applied yet would change the product under it: refused too (see refuseWhileOtherPaid).
 */
async function extensionStillFits(client: Client, snapshot: Snapshot, priced: ServiceRow): Promise<void> {
  const {
    rows: [now],
  } = await client.query(
    'SELECT product_id, limits, status, expires_at, stopped_at FROM services WHERE id = $1 FOR UPDATE',
    [priced.id],
  );
  if (now) checkExtensible(snapshot, now);
  if (!now || now.product_id !== priced.product_id || canonicalJson(now.limits) !== canonicalJson(priced.limits)) {
    throw new ApiError(
      409,
      'service_changed',
      'The service changed while this extension was being paid (another extension or an upgrade); nothing was charged. Read the service (GET /services/{service_id}) and extend again if it still needs more time.',
    );
  }
  await refuseWhileOtherPaid(client, priced.id, 'upgrade');
}
