import type { Catalog } from './types.js';

/**
 * Which products an agent can buy an AutoDJ with, in words for agent-facing text: those that include one (limits
 * `autodj: true`) and those that offer it as the order parameter `autodj`.
 */
export function autoDjOffer(catalog: Catalog): string {
  const products = catalog.products.map((entry) => entry.product).filter((p) => p.orderable.agent);
  const included = products.filter((p) => p.limits.autodj === true).map((p) => p.id);
  const onOrder = products.filter((p) => p.parameters.autodj?.type === 'boolean').map((p) => p.id);
  const offers = [...included, ...onOrder.map((id) => `${id} ordered with autodj: true`)];
  return offers.length ? offers.join(', or ') : 'no product at present';
}
