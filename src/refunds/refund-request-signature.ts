import { createHash } from 'node:crypto';
import { getAddress, recoverTypedDataAddress, zeroAddress, type Address, type Hex } from 'viem';

/** A refund request in the form of x402's proposed refund extension (specs/extensions/refund.md). */
export interface RefundRequest {
  x402Version: 2;
  paymentReference: { txHash: string; network: string; paymentId?: string };
  amount: string;
  reason: string;
  reasonDetail?: string;
  refundTo?: string;
  idempotencyKey: string;
  receipt?: unknown;
  /** Ours, signed with the rest: unix seconds after which the request is refused (absent: no expiry). */
  validBefore?: number;
  payerSignature: string;
}

export const REFUND_REQUEST_DOMAIN_NAME = 'x402 refund request';

/**
 * The EIP-712 types the payer signs. The proposal asks for a signature "over the canonical request bytes" without
 * fixing them: every field but the receipt (signed by us already) and the signature itself, absent ones as their
 * zero value (empty string, the zero address, 0).
 */
export const REFUND_REQUEST_TYPES = {
  RefundRequest: [
    { name: 'x402Version', type: 'uint256' },
    { name: 'network', type: 'string' },
    { name: 'txHash', type: 'bytes32' },
    { name: 'paymentId', type: 'string' },
    { name: 'amount', type: 'uint256' },
    { name: 'reason', type: 'string' },
    { name: 'reasonDetail', type: 'string' },
    { name: 'refundTo', type: 'address' },
    { name: 'idempotencyKey', type: 'string' },
    { name: 'validBefore', type: 'uint256' },
  ],
} as const;

/** The typed data of a request, as the payer signs it (viem's signTypedData takes it as is). */
export function refundRequestTypedData(request: Omit<RefundRequest, 'payerSignature'>) {
  const chainId = Number(request.paymentReference.network.split(':')[1]);
  return {
    domain: { name: REFUND_REQUEST_DOMAIN_NAME, version: '1', chainId },
    types: REFUND_REQUEST_TYPES,
    primaryType: 'RefundRequest' as const,
    message: {
      x402Version: BigInt(request.x402Version),
      network: request.paymentReference.network,
      txHash: request.paymentReference.txHash as Hex,
      paymentId: request.paymentReference.paymentId ?? '',
      amount: BigInt(request.amount),
      reason: request.reason,
      reasonDetail: request.reasonDetail ?? '',
      refundTo: (request.refundTo ?? zeroAddress) as Address,
      idempotencyKey: request.idempotencyKey,
      validBefore: BigInt(request.validBefore ?? 0),
    },
  };
}

/** The address that signed the request, or undefined when the signature recovers to nobody. */
export async function refundRequestSigner(request: RefundRequest): Promise<Address | undefined> {
  try {
    const { payerSignature, ...signed } = request;
    return getAddress(
      await recoverTypedDataAddress({ ...refundRequestTypedData(signed), signature: payerSignature as Hex }),
    );
  } catch {
    return undefined;
  }
}

/** What makes two requests under one idempotency key the same request: every field, the signature included. */
export function refundRequestDigest(request: RefundRequest): string {
  const canonical = JSON.stringify(request, Object.keys(flatKeys(request)).sort());
  return createHash('sha256').update(canonical).digest('hex');
}

function flatKeys(value: unknown, into: Record<string, true> = {}): Record<string, true> {
  if (value && typeof value === 'object') {
    for (const [key, inner] of Object.entries(value)) {
      into[key] = true;
      flatKeys(inner, into);
    }
  }
  return into;
}
