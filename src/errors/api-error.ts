/** An error the API answers with an error document (spec 2.8); the message tells an agent what to do next. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly options: { retryable?: boolean; details?: unknown; headers?: Record<string, string> } = {},
  ) {
    super(message);
  }

  get retryable(): boolean {
    return this.options.retryable ?? false;
  }
}
