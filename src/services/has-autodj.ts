/**
 * Whether a service has an AutoDJ. Its limits say so: a product that includes one has `autodj: true` among the limits
 * of its catalog file, copied into each service bought from it (orders/service-limits.ts), and a product that offers one
 * takes `autodj: true` as an order parameter.
 */
export function hasAutoDj(service: { limits: Record<string, unknown> }): boolean {
  return service.limits.autodj === true;
}
