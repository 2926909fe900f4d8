import { priceRecordText } from '../audit/index.js';
import { ApiError } from '../errors/index.js';
import { finishedRecordings, keepRecordings, missingRecordings, type RetainedRecording } from '../recordings/index.js';
import { atomicToAmount } from '../rules/index.js';
import type { ServiceRow } from '../services/index.js';
import type { Client } from '../store/index.js';
import type { Demand, PricedSale, PricingContext, Provisioning, SaleKind } from './sale-kind.js';
import { priceRetention, RETENTION_PRODUCT } from './retention-price.js';

/** What an owner asks to keep: days, and optionally which recordings (all the finished ones otherwise). */
export interface RetentionRequest {
  retention_of: string;
  retention_days: number;
  recording_ids?: string[];
}

/**
 * Recordings kept past their service's end (the audio-storage-api product): priced on the finished recordings'
 * bytes and the days asked, fixed in the order; nothing is asked of the hosts.
 */
export class RetentionSale implements SaleKind {
  readonly request: RetentionRequest;
  readonly changes: { upgrade_of: null; retention_of: string };
  readonly newStream = false;
  /** The recordings the price was computed on: they must all still be there at claim. */
  private kept: RetainedRecording[] = [];

  constructor(
    private readonly service: ServiceRow,
    days: number,
    recordingIds?: string[],
  ) {
    this.request = {
      retention_of: service.id,
      retention_days: days,
      ...(recordingIds && { recording_ids: [...new Set(recordingIds)].sort() }),
    };
    this.changes = { upgrade_of: null, retention_of: service.id };
  }

  async price({ snapshot, db }: PricingContext): Promise<PricedSale> {
    this.kept = chosen(await finishedRecordings(db, this.service.id), this.request.recording_ids);
    const { input, priced, storageBytes } = await priceRetention(snapshot, this.kept, this.request.retention_days);
    const amountAtomic = priced.output.total_atomic;
    const count = this.kept.length;
    return {
      priced,
      amountAtomic,
      billing: 'one_time',
      configuration: {
        ...input.parameters,
        storage_bytes: storageBytes,
        recording_ids: this.kept.map((r) => r.id),
      },
      description: `${this.request.retention_days} days of retention for ${count} recording${count === 1 ? '' : 's'} of service ${this.service.id} (${RETENTION_PRODUCT}) for ${atomicToAmount(amountAtomic, 6)} USDC`,
      evidence: (id, snapshotHash, at) => ({
        record: { kind: 'order_price' },
        ...priceRecordText(snapshotHash, input, priced, 'order_price')(id, at),
      }),
    };
  }

  /** Storage only: no stream, no listener place, no host. */
  demand(): Demand {
    return { load: { sources: 0, listeners: 0 } };
  }

  /**
   * Under the service's row lock: every recording priced is still there (the owner may have deleted one since the
   * price), and no other retention of this service is being paid (each is priced on the recordings as they are).
   */
  async stillFits(client: Client): Promise<void> {
    const serviceId = this.service.id;
    await client.query('SELECT 1 FROM services WHERE id = $1 FOR UPDATE', [serviceId]);
    const gone = await missingRecordings(
      client,
      serviceId,
      this.kept.map((r) => r.id),
    );
    if (gone.length) throw recordingsGone(gone);
    const { rows } = await client.query(
      `SELECT id FROM orders WHERE retention_of = $1 AND state IN ('settling', 'provisioning') LIMIT 1`,
      [serviceId],
    );
    if (rows.length) {
      throw new ApiError(
        409,
        'retention_in_progress',
        `A retention of this service's recordings (order ${rows[0].id}) is being paid right now; nothing was charged for this one. Read GET /services/{service_id}/recordings in a few seconds and buy again if you still need more days: the days add up.`,
        { retryable: true, retryAfterSeconds: 2, details: [{ order_id: rows[0].id }] },
      );
    }
  }
}

/** A paid retention sets how long its recordings are kept; the service itself does not change. */
export const retentionProvisioning: Provisioning = {
  newStream: false,
  serviceOf: (order) => order.retention_of ?? undefined,
  apply: async (client, order, services) => {
    const serviceId = order.retention_of!;
    const ids = (order.configuration.recording_ids as string[] | undefined) ?? [];
    // A recording the owner deleted after the claim is simply not kept; the others are.
    await keepRecordings(client, serviceId, ids, Number(order.configuration.retention_days));
    const service = await services.byId(serviceId);
    if (!service) throw new Error(`service ${serviceId} of retention order ${order.id} is gone`);
    return service;
  },
};

/** The finished recordings asked for, or all of them; refused when one asked is not there or none is. */
function chosen(finished: RetainedRecording[], ids: string[] | undefined): RetainedRecording[] {
  if (ids) {
    const byId = new Map(finished.map((r) => [r.id, r]));
    const gone = ids.filter((id) => !byId.has(id));
    if (gone.length) throw recordingsGone(gone);
    return ids.map((id) => byId.get(id)!);
  }
  if (!finished.length) {
    throw new ApiError(
      409,
      'no_recordings',
      'This service has no finished recording to keep; nothing was charged. GET /services/{service_id}/recordings lists them (a show being recorded is finished a minute after its source leaves).',
    );
  }
  return finished;
}

function recordingsGone(ids: string[]): ApiError {
  return new ApiError(
    409,
    'recording_gone',
    `Recording ${ids.join(', ')} of this service is not there (deleted, or not finished) any more; nothing was charged. GET /services/{service_id}/recordings lists what can be kept: buy again for those.`,
    { details: ids.map((id) => ({ recording_id: id })) },
  );
}
