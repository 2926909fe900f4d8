import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import { idempotencyKeyPattern } from './schemas.js';

const valid = new RegExp(idempotencyKeyPattern);

/**
 * The Idempotency-Key header, checked: 1..255 printable ASCII characters. Orders require it (400 when absent or
 * malformed, as a header problem); on quotes it is optional and a malformed one is an invalid request (422).
 */
export function idempotencyKey(ctx: Context, required: boolean): string | undefined {
  const present = ctx.headers['idempotency-key'] !== undefined;
  const key = ctx.get('Idempotency-Key');
  if (!present && !required) return undefined;
  if (valid.test(key)) return key;
  throw new ApiError(
    required ? 400 : 422,
    required ? 'idempotency_key_missing' : 'idempotency_key_invalid',
    present
      ? 'The Idempotency-Key header must be 1 to 255 printable ASCII characters, e.g. a UUID. Send a valid one ' +
          'and keep it for every retry of the same request.'
      : 'This operation needs an Idempotency-Key header (1 to 255 printable ASCII characters, e.g. a new ' +
          'UUID). Reuse the same key when you retry the same request so it is not performed twice.',
  );
}
