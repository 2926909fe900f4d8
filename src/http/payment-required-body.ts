import { decodePaymentRequiredHeader } from '@x402/core/http';

export interface PaymentRequiredFields {
  x402Version: number;
  accepts: unknown[];
}

const decoded = new Map<string, PaymentRequiredFields>();

/**
 * What a 402's body repeats of its PAYMENT-REQUIRED header: `x402Version` and `accepts`. x402 v1 clients (x402-fetch
 * 1.x, x402-axios 0.x) read `accepts` from the body and call `.map` on it: without it they crash with a TypeError;
 * with it they fail on the v2 requirements (network "eip155:8453" is no v1 network name) and say so, and pay nothing.
 * v2 clients read the header. The header is built once per amount and resource, so its decoding is kept too.
 */
export function paymentRequiredFields(header: string): PaymentRequiredFields | undefined {
  let fields = decoded.get(header);
  if (!fields) {
    try {
      const required = decodePaymentRequiredHeader(header);
      fields = { x402Version: required.x402Version, accepts: required.accepts };
    } catch {
      return undefined;
    }
    if (decoded.size >= 200) decoded.clear();
    decoded.set(header, fields);
  }
  return fields;
}
