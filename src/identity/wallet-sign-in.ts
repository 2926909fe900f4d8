import { encodePaymentRequiredHeader } from '@x402/core/http';
import type { PaymentRequired } from '@x402/core/types';
import {
  buildSIWxSchema, parseSIWxHeader, SIGN_IN_WITH_X, validateSIWxMessage, verifySIWxSignature,
  type EVMMessageVerifier, type SIWxExtension, type SIWxPayload,
} from '@x402/extensions/sign-in-with-x';
import { ApiError } from '../errors/index.js';
import type { NonceRefusal, SignInNonces } from './sign-in-nonces.js';

/** The request header that carries a signed SIWX message (base64 JSON), as the x402 extension names it. */
export const SIGN_IN_HEADER = SIGN_IN_WITH_X.toUpperCase();

/** The longest a challenge may be valid for, whatever the configuration says. */
export const MAX_CHALLENGE_SECONDS = 900;

export interface WalletSignInOptions {
  /** The API's public address (…/api/v1); its origin is the only domain and URI origin a message may name. */
  publicBaseUrl: () => string;
  /** The CAIP-2 chain wallets sign for, e.g. "eip155:8453". */
  network: string;
  /** How long a challenge may be answered (at most MAX_CHALLENGE_SECONDS). */
  challengeSeconds: number;
  /** Verifies smart-wallet signatures (EIP-1271/EIP-6492) on chain when a plain EOA signature does not match. */
  evmVerifier?: EVMMessageVerifier;
}

const AGAIN = 'Ask again without SIGN-IN-WITH-X: the 402 answer carries a fresh challenge in its PAYMENT-REQUIRED header (extensions["sign-in-with-x"]); sign it with your wallet and send it once.';

/**
 * Sign-in with a wallet (x402 "sign-in-with-x", CAIP-122 / EIP-4361): challenges whose nonces are stored, and the check
 * of a signed answer — bound to this service's public origin and chain, unexpired, its nonce used once.
 */
export class WalletSignIn {
  private readonly challengeSeconds: number;

  constructor(private readonly nonces: SignInNonces, private readonly options: WalletSignInOptions) {
    this.challengeSeconds = Math.max(1, Math.min(MAX_CHALLENGE_SECONDS, Math.floor(options.challengeSeconds)));
  }

  /** The x402 PaymentRequired of a sign-in (no payment: `accepts: []`) with a fresh challenge for this resource. */
  async paymentRequired(resourceUrl: string, description: string): Promise<PaymentRequired> {
    const origin = this.origin();
    const resource = new URL(resourceUrl);
    const uri = new URL(resource.pathname + resource.search, origin).href;
    const { nonce, issuedAt, expiresAt } = await this.nonces.issue(uri, this.challengeSeconds);
    const declaration: SIWxExtension = {
      info: {
        domain: origin.host,
        uri,
        version: '1',
        nonce,
        issuedAt: issuedAt.toISOString(),
        expirationTime: expiresAt.toISOString(),
        statement: `Sign in to ${origin.host} with this wallet.`,
        resources: [uri],
      },
      supportedChains: [{ chainId: this.options.network, type: 'eip191' }],
      schema: buildSIWxSchema(),
    };
    return {
      x402Version: 2,
      error: 'Sign in with your wallet: sign extensions["sign-in-with-x"] and send it in the SIGN-IN-WITH-X header.',
      resource: { url: resourceUrl, description, mimeType: 'application/json' },
      accepts: [],
      extensions: { [SIGN_IN_WITH_X]: declaration },
    };
  }

  /** The 402 answer to a request that needs a signed-in wallet (or, where `alternative` says so, a key) and sent neither. */
  async challenge(resourceUrl: string, description: string, alternative = ''): Promise<ApiError> {
    const required = await this.paymentRequired(resourceUrl, description);
    return new ApiError(402, 'authentication_required',
      `${alternative}Sign in with your wallet: sign the SIWX challenge in the PAYMENT-REQUIRED header (extensions["sign-in-with-x"], CAIP-122/EIP-4361, chain ${this.options.network}) and send the signed message, base64 JSON, in the SIGN-IN-WITH-X header within ${this.challengeSeconds} s; each challenge is accepted once. The x402 client hook createSIWxClientHook does this.`,
      { headers: { 'PAYMENT-REQUIRED': encodePaymentRequiredHeader(required), 'WWW-Authenticate': 'Bearer realm="agent-audio-api"' } });
  }

  /** The wallet (lower-case 0x address) a SIGN-IN-WITH-X header proves; otherwise throws the 401 saying what is wrong. */
  async verify(header: string): Promise<string> {
    let payload: SIWxPayload;
    try {
      payload = parseSIWxHeader(header.trim());
    } catch (e) {
      throw invalid(`The SIGN-IN-WITH-X header cannot be read (${(e as Error).message.slice(0, 300)}). It must be the base64 JSON of the signed message.`);
    }
    if (payload.chainId !== this.options.network || payload.type !== 'eip191') {
      throw invalid(`The message is signed for ${payload.chainId} (${payload.type}); this service accepts ${this.options.network} with eip191 signatures.`);
    }
    if (!payload.expirationTime) throw invalid('The message has no expirationTime; sign the challenge as issued, with its expirationTime.');
    const valid = await validateSIWxMessage(payload, this.origin(), { maxAge: this.challengeSeconds * 1000 });
    if (!valid.isValid) {
      if (valid.invalidReason === 'invalid_siwx_expired' || valid.invalidReason === 'invalid_siwx_issued_at_too_old') throw expired();
      throw invalid(`The message is not valid for this service: ${valid.invalidMessage}.`);
    }
    const signed = await this.verifySignature(payload);
    if (!signed) throw invalid(`The signature does not match ${payload.address}: sign the message with the wallet it names.`);
    const refusal = await this.nonces.consume(payload.nonce, payload.uri);
    if (refusal) throw nonceRefused(refusal);
    return payload.address.toLowerCase();
  }

  /** EOA signatures are checked locally; only when that fails and a chain is configured, a smart wallet is asked. */
  private async verifySignature(payload: SIWxPayload): Promise<boolean> {
    if ((await verifySIWxSignature(payload)).isValid) return true;
    if (!this.options.evmVerifier) return false;
    return (await verifySIWxSignature(payload, { evmVerifier: this.options.evmVerifier })).isValid;
  }

  private origin(): URL {
    return new URL(new URL(this.options.publicBaseUrl()).origin);
  }
}

function invalid(reason: string): ApiError {
  return new ApiError(401, 'siwx_invalid', `${reason} ${AGAIN}`);
}

function expired(): ApiError {
  return new ApiError(401, 'siwx_expired', `The signed message has expired. ${AGAIN}`);
}

function nonceRefused(refusal: NonceRefusal): ApiError {
  if (refusal === 'used') return new ApiError(401, 'siwx_nonce_used', `This challenge was already used; a signed message is accepted once. ${AGAIN}`);
  if (refusal === 'expired') return expired();
  return invalid('The message\'s nonce and URI are not a challenge this service issued.');
}
