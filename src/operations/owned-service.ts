import type { Caller } from '../identity/index.js';
import type { ServiceRecords, ServiceRow } from '../services/index.js';

/** A service the caller may read and manage: one its API key ordered, or one its signed-in wallet paid for. */
export function ownedService(
  services: ServiceRecords | undefined,
  caller: Caller,
  serviceId: string,
): Promise<ServiceRow | undefined> | undefined {
  return caller.kind === 'wallet'
    ? services?.paidBy(caller.address, serviceId)
    : services?.owned(caller.key.id, serviceId);
}
