import type { PaidCall } from '../operations/index.js';
import { declareRefundExtension } from '../payments/index.js';

/** Where refund requests in the proposed x402 form are POSTed, under /api/v1. */
export const REFUND_ENDPOINT_PATH = '/x402/refund';

/**
 * A paid call whose 402 also advertises our refund terms in the form of x402's proposed refund extension: the owner
 * may stop the service and get back the unused share (partial refunds) for as long as the service runs, which is at
 * least the hours this payment buys after its settlement (the window advertised). Nothing is advertised where stops
 * are not offered or the hours are not known.
 */
export function withRefundTerms(
  call: PaidCall,
  deps: { refunds?: unknown; publicBaseUrl: () => string },
  hours: unknown,
): PaidCall {
  const windowSeconds = typeof hours === 'number' && hours > 0 ? Math.floor(hours * 3600) : 0;
  if (!deps.refunds || !call.discovery || windowSeconds === 0) return call;
  const { declaration } = call.discovery;
  const refund = declareRefundExtension({
    refundEndpoint: `${deps.publicBaseUrl()}${REFUND_ENDPOINT_PATH}`,
    windowSeconds,
    partialRefunds: true,
  });
  return {
    ...call,
    discovery: {
      ...call.discovery,
      declaration: {
        ...declaration,
        key: `${declaration.key}\nrefund ${windowSeconds}`,
        extensions: { ...declaration.extensions, ...refund },
      },
    },
  };
}
