import { type PlacedOrder, RetentionSale } from '../orders/index.js';
import type { ServiceRow } from '../services/index.js';
import type { OperationDeps, PaidCall } from './operation-deps.js';
import { place } from './place.js';

export interface RetainRecordingsCall {
  /** The service, already found to be the caller's. */
  service: ServiceRow;
  idempotencyKey: string;
  days: number;
  /** Which finished recordings to keep; all of them when left out. */
  recordingIds?: string[];
  payment: PaidCall;
}

/** Keeps a service's recordings past its end (the audio-storage-api product), paid like any order. */
export function retainRecordings(
  deps: OperationDeps,
  { service, idempotencyKey, days, recordingIds, payment }: RetainRecordingsCall,
): Promise<PlacedOrder> {
  const sale = new RetentionSale(service, days, recordingIds);
  return place(deps, { apiKeyId: service.api_key_id, idempotencyKey, sale }, payment);
}
