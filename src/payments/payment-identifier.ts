import { isDeepStrictEqual } from 'node:util';
import { isValidPaymentId, paymentIdentifierSchema } from '@x402/extensions/payment-identifier';

/** What a PAYMENT-SIGNATURE's payment-identifier extension says: no id, an id, or why it is refused. */
export type PaymentIdentifier = { id: string } | { invalid: string } | undefined;

/**
 * Reads the payment-identifier extension by hand, against the schema this service declares.
 *
 * The library's validator compiles and runs whatever JSON Schema the payload carries: a client could make us build
 * an Ajv validator per request and run its regular expressions (one catastrophic pattern froze the event loop for
 * seconds). So nothing the client sent is ever compiled or run: a schema other than ours is refused.
 */
export function readPaymentIdentifier(extension: unknown): PaymentIdentifier {
  if (extension === undefined || extension === null) return undefined;
  if (typeof extension !== 'object' || Array.isArray(extension)) return { invalid: 'the extension must be an object' };
  const { info, schema } = extension as { info?: unknown; schema?: unknown };
  if (schema !== undefined && !isDeepStrictEqual(schema, paymentIdentifierSchema)) {
    return {
      invalid: 'its schema is not the one this service declares in PAYMENT-REQUIRED; send the declared schema or none',
    };
  }
  if (typeof info !== 'object' || info === null || Array.isArray(info))
    return { invalid: "it must have an 'info' object" };
  const { required, id } = info as { required?: unknown; id?: unknown };
  if (typeof required !== 'boolean') return { invalid: 'info.required must be a boolean' };
  if (id === undefined) return undefined;
  if (typeof id !== 'string' || !isValidPaymentId(id))
    return { invalid: 'info.id must be 16 to 128 characters of A-Z, a-z, 0-9, _ and -' };
  return { id };
}
