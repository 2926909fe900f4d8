import { x402Client, x402HTTPClient } from '@x402/core/client';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import {
  createSIWxClientHook,
  createSIWxMessage,
  createSIWxPayload,
  encodeSIWxHeader,
  type SIWxExtension,
  type SIWxPayload,
} from '@x402/extensions/sign-in-with-x';
import { wrapFetchWithPayment } from '@x402/fetch';
import type { PrivateKeyAccount } from 'viem/accounts';

/** fetch that answers a sign-in challenge (402 with extensions["sign-in-with-x"]) the way the official x402 client does. */
export function signingInFetch(account: PrivateKeyAccount): typeof fetch {
  const client = new x402HTTPClient(new x402Client()).onPaymentRequired(createSIWxClientHook(account));
  return wrapFetchWithPayment(fetch, client);
}

/** The sign-in challenge of a 402 answer. */
export function challengeOf(response: { headers: Headers }): SIWxExtension {
  const header = response.headers.get('payment-required');
  if (!header) throw new Error('no PAYMENT-REQUIRED header');
  return decodePaymentRequiredHeader(header).extensions!['sign-in-with-x'] as SIWxExtension;
}

/**
 * A SIGN-IN-WITH-X header for this challenge, signed by `account` with the package's client functions; `change` edits
 * the challenge before signing (a client that lies), `after` the signed payload.
 */
export async function signedHeader(
  challenge: SIWxExtension,
  account: PrivateKeyAccount,
  options: { change?: Partial<SIWxExtension['info']>; after?: (p: SIWxPayload) => void } = {},
): Promise<string> {
  const info = {
    ...challenge.info,
    ...options.change,
    chainId: challenge.supportedChains[0].chainId,
    type: challenge.supportedChains[0].type,
  };
  // The package's client refuses to sign a challenge bound to another origin than the one asked; a lying client signs anyway.
  const payload: SIWxPayload =
    options.change?.domain || options.change?.uri
      ? {
          ...info,
          address: account.address,
          signature: await account.signMessage({ message: createSIWxMessage(info, account.address) }),
        }
      : await createSIWxPayload(info, account, info.uri);
  options.after?.(payload);
  return encodeSIWxHeader(payload);
}
