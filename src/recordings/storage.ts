const MB = 1024 * 1024;

/** What a service's product includes: its catalog's limits.recording_storage_mb (0: the product does not record). */
export type IncludedStorage = (productId: string) => number;

/** The products of a catalog snapshot as the recordings need them. */
export function includedStorageOf(products: () => { product: { id: string; limits: Record<string, unknown> } }[]) {
  return (productId: string): number =>
    Number(products().find((e) => e.product.id === productId)?.product.limits.recording_storage_mb ?? 0) || 0;
}

/** The recording storage a service has, in bytes: what its product includes and the recording_storage_gb it bought. */
export function recordingStorageBytes(
  service: { product_id: string; limits: Record<string, unknown> },
  included: IncludedStorage,
): number {
  const includedMb = included(service.product_id);
  if (!includedMb) return 0;
  const extraGb = Number(service.limits.recording_storage_gb ?? 0);
  return Math.floor((includedMb + (Number.isFinite(extraGb) ? extraGb : 0) * 1024) * MB);
}

/** Why a service cannot record now, or undefined when it can. */
export function storageProblem(bought: number, usedBytes: number): string | undefined {
  if (!bought) {
    return 'this service has no recording storage: its product does not record (instant-stream and event-stream do)';
  }
  if (usedBytes >= bought) {
    const mb = (bytes: number) => (bytes / MB).toFixed(1);
    return `the recording storage is full (${mb(usedBytes)} MB used of ${mb(bought)} MB): delete recordings (DELETE /services/{id}/recordings/{recording_id}) or order recording_storage_gb with a new service`;
  }
  return undefined;
}
