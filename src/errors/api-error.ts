export interface ApiErrorOptions {
  retryable?: boolean;
  details?: unknown;
  /** When a retry may succeed (HTTP: Retry-After). */
  retryAfterSeconds?: number;
  /** The x402 terms to pay, encoded as x402 encodes PaymentRequired (HTTP: the PAYMENT-REQUIRED header). */
  paymentRequired?: string;
  /** The caller must authenticate with a bearer key (HTTP: WWW-Authenticate). */
  bearerChallenge?: boolean;
  /** Transport-only headers, set by the HTTP room itself (e.g. Connection: close). */
  headers?: Record<string, string>;
}

/** An error the API answers with an error document (spec 2.8); the message tells an agent what to do next. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly options: ApiErrorOptions = {},
  ) {
    // A client's error is an answer, not a fault: its stack is never read, and capturing one was ~2 % of a 402's CPU.
    const limit = Error.stackTraceLimit;
    if (status < 500) Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
  }

  get retryable(): boolean {
    return this.options.retryable ?? false;
  }
}
