import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import { Decimal } from '../rules/index.js';
import { unsafeJson } from '../schema/json-limits.js';

export const MAX_BODY_BYTES = 64 * 1024;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Reads a JSON object body: 415 for another content type, 413 above the limit, 422 for bad UTF-8 or JSON, or a non-object. */
export async function readJsonObject(ctx: Context): Promise<Record<string, unknown>> {
  const value = await readJson(ctx);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ApiError(
      422,
      'invalid_json',
      'The body must be one JSON object, for example {"product_id": "instant-stream", "parameters": {...}}.',
    );
  }
  return value as Record<string, unknown>;
}

/** Reads a JSON body of any shape, with the checks of readJsonObject but the last. */
export async function readJson(ctx: Context): Promise<unknown> {
  const type = ctx.request.type.toLowerCase();
  if (type !== 'application/json' && !type.endsWith('+json')) {
    throw new ApiError(
      415,
      'unsupported_media_type',
      `The body must be JSON sent with "Content-Type: application/json" (got ${type ? `"${type}"` : 'none'}).`,
    );
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
  let text: string;
  try {
    text = utf8.decode(Buffer.concat(chunks));
    value = JSON.parse(text);
  } catch (e) {
    throw new ApiError(
      422,
      'invalid_json',
      `The body is not valid UTF-8 JSON (${(e as Error).message}). Send one JSON object.`,
    );
  }
  const inexact = firstInexactNumber(text);
  if (inexact) {
    throw new ApiError(
      422,
      'number_not_exact',
      `The number ${inexact.slice(0, 40)} cannot be read exactly (it has too many significant digits or is out of range). Send numbers with at most 15 significant digits.`,
    );
  }
  const unsafe = unsafeJson(value);
  if (unsafe) throw new ApiError(422, 'invalid_json', `The body cannot be accepted: ${unsafe}. Send plain JSON text.`);
  return value;
}

function tooLarge(): ApiError {
  return new ApiError(
    413,
    'body_too_large',
    `The body is larger than ${MAX_BODY_BYTES} bytes. Send only the fields the operation describes.`,
  );
}

const tokens = /"(?:[^"\\]|\\.)*"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/g;

/** JSON.parse reads numbers as binary doubles; a number whose value changes on the way in is refused rather than priced wrong. */
function firstInexactNumber(text: string): string | undefined {
  for (const [token] of text.matchAll(tokens)) {
    if (token.startsWith('"')) continue;
    const parsed = Number(token);
    if (!Number.isFinite(parsed) || !new Decimal(token).equals(String(parsed))) return token;
  }
  return undefined;
}
