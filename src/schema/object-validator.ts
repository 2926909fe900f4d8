import { ApiError } from '../errors/index.js';
import { schemaProblems } from './ajv.js';
import { cachedValidator } from './validator-cache.js';

/** Checks a JSON object against a request schema (filling in defaults): 422 invalid_request with one JSON pointer per problem. */
export function objectValidator<T>(schema: Record<string, unknown>, what: string, describedBy: string) {
  // Compiled on its first request: a process that never serves a route never compiles (or loads) its schema.
  const validator = cachedValidator<T>(schema, { useDefaults: true });
  return (value: unknown): T => {
    const validate = validator();
    if (validate(value)) return value as T;
    const details = schemaProblems(validate.errors).map(({ pointer, code, message }) => ({ pointer, code, message }));
    throw new ApiError(
      422,
      'invalid_request',
      `The ${what} is not valid: ${details.map((d) => `${d.pointer || '/'} ${d.message}`).join('; ')}. Fix it as listed in error.details; ${describedBy}.`,
      { details },
    );
  };
}
