import { ApiError } from '../errors/index.js';

/**
 * Open event streams (SSE) of this instance, counted per API key and per service: an open stream costs a connection
 * and a reader, and a key costs nothing to get, so the address cap alone (which trusted proxies and many addresses
 * get around) is not enough. Over a cap: 429 too_many_event_streams.
 */
export class EventStreamCaps {
  private readonly byKey = new Map<string, number>();
  private readonly byService = new Map<string, number>();

  constructor(
    readonly perKey: number,
    readonly perService: number,
  ) {}

  /** Counts a new stream; returns what ends it (call it once, when the stream ends). Throws the 429 over a cap. */
  open(keyId: string, serviceId: string): () => void {
    if ((this.byService.get(serviceId) ?? 0) >= this.perService) {
      throw refusal(
        `This service already has ${this.perService} event streams open, the most allowed. ` +
          'Close one, or follow the service with one stream (or a webhook), then retry.',
      );
    }
    if ((this.byKey.get(keyId) ?? 0) >= this.perKey) {
      throw refusal(
        `This API key already has ${this.perKey} event streams open, the most allowed. ` +
          'Close one, or register a webhook (POST /webhooks) for every service of your key, then retry.',
      );
    }
    add(this.byService, serviceId, 1);
    add(this.byKey, keyId, 1);
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      add(this.byService, serviceId, -1);
      add(this.byKey, keyId, -1);
    };
  }
}

function add(counts: Map<string, number>, id: string, by: number): void {
  const count = (counts.get(id) ?? 0) + by;
  if (count > 0) counts.set(id, count);
  else counts.delete(id);
}

function refusal(message: string): ApiError {
  return new ApiError(429, 'too_many_event_streams', message, { retryable: true, retryAfterSeconds: 5 });
}
