/** An error the API answers with an error document (spec 2.8); the message tells an agent what to do next. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly options: { retryable?: boolean; details?: unknown; headers?: Record<string, string> } = {},
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
