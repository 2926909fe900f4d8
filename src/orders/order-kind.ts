import { extensionProvisioning } from './extension-sale.js';
import { newStreamProvisioning } from './new-stream-sale.js';
import type { OrderRow } from './order-store.js';
import { retentionProvisioning } from './retention-sale.js';
import type { Provisioning } from './sale-kind.js';
import { upgradeProvisioning } from './upgrade-sale.js';

/** How the order is delivered: by the kind of sale it was. */
export function provisioningOf(order: Pick<OrderRow, 'upgrade_of' | 'extension_of' | 'retention_of'>): Provisioning {
  if (order.retention_of) return retentionProvisioning;
  if (order.extension_of) return extensionProvisioning;
  if (order.upgrade_of) return upgradeProvisioning;
  return newStreamProvisioning;
}
