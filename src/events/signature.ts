import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'X-Agent-Audio-Signature';
export const EVENT_ID_HEADER = 'X-Agent-Audio-Event-Id';
/** How old a signed timestamp a receiver should accept (the verification example in docs/api.md uses it). */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

function hmac(secret: string, timestamp: number, body: string): string {
  return createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
}

/** `t=<unix seconds>,v1=<hex>[,v1=<hex>]`: one v1 per valid secret (two while a rotated-out secret is in its grace). */
export function signatureHeader(secrets: string[], body: string, timestamp = Math.floor(Date.now() / 1000)): string {
  return [`t=${timestamp}`, ...secrets.map((s) => `v1=${hmac(s, timestamp, body)}`)].join(',');
}

/** What a receiver does: some v1 matches the HMAC of "t.body" under its secret, and t is recent. */
export function verifySignature(
  header: string,
  body: string,
  secret: string,
  now = Date.now() / 1000,
  toleranceSeconds = SIGNATURE_TOLERANCE_SECONDS,
): boolean {
  const parts = header.split(',').map((p) => p.trim().split('='));
  const timestamp = Number(parts.find(([k]) => k === 't')?.[1]);
  if (!Number.isInteger(timestamp) || Math.abs(now - timestamp) > toleranceSeconds) return false;
  const expected = Buffer.from(hmac(secret, timestamp, body));
  return parts.some(
    ([k, v]) =>
      k === 'v1' && v !== undefined && v.length === expected.length && timingSafeEqual(Buffer.from(v), expected),
  );
}
