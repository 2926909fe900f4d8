import { canonicalJson, upgradeRecord } from '../audit/index.js';
import { ApiError } from '../errors/index.js';
import type { Snapshot } from '../pricing/index.js';
import { atomicToAmount } from '../rules/index.js';
import type { ServiceRow } from '../services/index.js';
import type { Client } from '../store/index.js';
import { refuseWhileOtherPaid } from './other-sale-in-flight.js';
import type { Demand, PricedSale, PricingContext, Provisioning, SaleKind } from './sale-kind.js';
import { streamLoadOf } from './service-limits.js';
import { priceUpgrade } from './upgrade-price.js';

/** A service turned into another product for the rest of its paid time; it stays on its host. */
export class UpgradeSale implements SaleKind {
  readonly request: { upgrade_of: string; product_id: string };
  readonly changes: { upgrade_of: string };
  readonly newStream = false;

  constructor(
    private readonly service: ServiceRow,
    productId: string,
  ) {
    this.request = { upgrade_of: service.id, product_id: productId };
    this.changes = { upgrade_of: service.id };
  }

  async price({ snapshot, db }: PricingContext): Promise<PricedSale> {
    const upgrade = await priceUpgrade(snapshot, this.service, this.request.product_id, db);
    const { priced, amountAtomic } = upgrade;
    return {
      priced,
      amountAtomic,
      billing: 'one_time',
      configuration: priced.output.configuration,
      description: `${priced.product.name} (${priced.product.id}) for ${atomicToAmount(amountAtomic, 6)} USDC`,
      evidence: (id, snapshotHash, at) => upgradeRecord(id, snapshotHash, upgrade.input, upgrade.evaluation, at),
    };
  }

  /** The listener places it adds on its service's host. */
  demand(sale: PricedSale): Demand {
    const load = streamLoadOf(sale.configuration, this.service);
    return { load, ...(this.service.host_id && { ownHost: this.service.host_id }) };
  }

  stillFits(client: Client, _snapshot: Snapshot): Promise<void> {
    return upgradeStillFits(client, this.service);
  }
}

/** An upgrade changes its service's product and limits once paid. */
export const upgradeProvisioning: Provisioning = {
  newStream: false,
  serviceOf: (order) => order.upgrade_of ?? undefined,
  apply: (client, order, services, limits) =>
    services.applyUpgrade(client, order.upgrade_of!, order.product_id, limits),
};

/**
 * An upgrade was priced on the service as it was then; under the service's row lock at claim time it must still be
 * that service, so that parallel upgrades cannot each be charged for the same change.
 */
async function upgradeStillFits(client: Client, priced: ServiceRow): Promise<void> {
  const {
    rows: [now],
  } = await client.query('SELECT product_id, limits, status FROM services WHERE id = $1 FOR UPDATE', [priced.id]);
  if (
    !now ||
    now.product_id !== priced.product_id ||
    canonicalJson(now.limits) !== canonicalJson(priced.limits) ||
    now.status !== priced.status
  ) {
    throw new ApiError(
      409,
      'service_changed',
      'The service changed while this upgrade was being paid (another upgrade or a status change); nothing was charged. Read the service (GET /services/{service_id}) and ask for the upgrade again if it still needs one.',
    );
  }
  await refuseWhileOtherPaid(client, priced.id, 'extension');
}
