import type { Context } from 'koa';
import { objectValidator } from '../schema/object-validator.js';
import { readJsonObject } from '../transport/index.js';

/** A body reader for one request schema: 422 with one JSON pointer per problem. */
export function bodyReader<T>(schema: Record<string, unknown>, what: string) {
  const check = objectValidator<T>(schema, `${what} body`, 'GET /api/v1/openapi.json describes it');
  return async (ctx: Context): Promise<T> => check(await readJsonObject(ctx));
}
