import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';

export const MAX_BODY_BYTES = 64 * 1024;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Reads a JSON object body: 415 for another content type, 413 above the limit, 422 for bad UTF-8 or JSON, or a non-object. */
export async function readJsonObject(ctx: Context): Promise<Record<string, unknown>> {
  const type = ctx.request.type;
  if (type !== 'application/json' && !type.endsWith('+json')) {
    throw new ApiError(415, 'unsupported_media_type', `The body must be JSON sent with "Content-Type: application/json" (got ${type ? `"${type}"` : 'none'}).`);
  }
  const declared = Number(ctx.get('Content-Length') || 0);
  if (declared > MAX_BODY_BYTES) {
    ctx.set('Connection', 'close');
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) {
      ctx.set('Connection', 'close');
      throw tooLarge();
    }
    chunks.push(chunk);
  }
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(Buffer.concat(chunks)));
  } catch (e) {
    throw new ApiError(422, 'invalid_json', `The body is not valid UTF-8 JSON (${(e as Error).message}). Send one JSON object.`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ApiError(422, 'invalid_json', 'The body must be one JSON object, for example {"product_id": "instant-stream", "parameters": {...}}.');
  }
  return value as Record<string, unknown>;
}

function tooLarge(): ApiError {
  return new ApiError(413, 'body_too_large', `The body is larger than ${MAX_BODY_BYTES} bytes. Send only the fields the operation describes.`);
}
