import { encodePaymentRequiredHeader } from '@x402/core/http';
import type { PaymentRequired } from '@x402/core/types';
import {
  buildSIWxSchema,
  createSIWxMessage,
  parseSIWxHeader,
  SIGN_IN_WITH_X,
  validateSIWxMessage,
  type SIWxExtension,
  type SIWxPayload,
} from '@x402/extensions/sign-in-with-x';
import type { Address } from 'viem';
import { ApiError } from '../errors/index.js';
import type { NonceRefusal, SignInNonces, SignInTarget } from './sign-in-nonces.js';
import type { WalletSignatures } from './wallet-signatures.js';

/** The request header that carries a signed SIWX message (base64 JSON), as the x402 extension names it. */
export const SIGN_IN_HEADER = SIGN_IN_WITH_X.toUpperCase();

/** The longest a challenge may be valid for, whatever the configuration says. */
export const MAX_CHALLENGE_SECONDS = 900;

/** The `accepts` entry of a sign-in challenge: it names the chain (x402 clients read it there) and costs nothing. */
export const SIGN_IN_SCHEME = 'sign-in-with-x';
const NOBODY = '0x0000000000000000000000000000000000000000';

export interface WalletSignInOptions {
  /** The API's public address (…/api/v1); its origin is the only domain and URI origin a message may name. */
  publicBaseUrl: () => string;
  /** The CAIP-2 chain wallets sign for, e.g. "eip155:8453". */
  network: string;
  /** How long a challenge may be answered (at most MAX_CHALLENGE_SECONDS). */
  challengeSeconds: number;
  /** Checks signatures: locally for plain wallets, on chain (budgeted) for smart wallets. */
  signatures: WalletSignatures;
}

/** What a request asks for: its method and the public URL of its resource (no query). */
export interface SignInRequest {
  method: string;
  resourceUrl: string;
}

const AGAIN =
  'Ask again without SIGN-IN-WITH-X: the 402 answer carries a fresh challenge in its PAYMENT-REQUIRED header ' +
  '(extensions["sign-in-with-x"]); sign it with your wallet and send it once.';
const TEXT_FIELDS = [
  'domain',
  'address',
  'statement',
  'uri',
  'version',
  'chainId',
  'type',
  'nonce',
  'issuedAt',
  'expirationTime',
  'notBefore',
  'requestId',
  'signature',
  'signatureScheme',
] as const;

/**
 * Sign-in with a wallet (x402 "sign-in-with-x", CAIP-122 / EIP-4361): challenges bound to one method and resource,
 * and the check of a signed answer — bound to this service's public origin, chain, method and resource, unexpired,
 * its nonce issued here and used once — where everything that needs no signature work is checked first.
 */
export class WalletSignIn {
  private readonly challengeSeconds: number;

  constructor(
    private readonly nonces: SignInNonces,
    private readonly options: WalletSignInOptions,
  ) {
    this.challengeSeconds = Math.max(1, Math.min(MAX_CHALLENGE_SECONDS, Math.floor(options.challengeSeconds)));
  }

  /** The x402 PaymentRequired of a sign-in (nothing to pay) with a fresh challenge for this method and resource. */
  async paymentRequired(request: SignInRequest, description: string): Promise<PaymentRequired> {
    const origin = this.origin();
    const uri = this.uriOf(request.resourceUrl);
    const { nonce, issuedAt, expiresAt } = await this.nonces.issue(
      { method: request.method, uri },
      this.challengeSeconds,
    );
    const declaration: SIWxExtension = {
      info: {
        domain: origin.host,
        uri,
        version: '1',
        nonce,
        issuedAt: issuedAt.toISOString(),
        expirationTime: expiresAt.toISOString(),
        statement:
          `Sign in to ${origin.host} for ${request.method.toUpperCase()} ${new URL(uri).pathname} with this ` +
          `wallet.`,
        resources: [uri],
      },
      supportedChains: [{ chainId: this.options.network, type: 'eip191' }],
      schema: buildSIWxSchema(),
    };
    return {
      x402Version: 2,
      error:
        'Sign in with your wallet: sign extensions["sign-in-with-x"] and send it in the SIGN-IN-WITH-X ' +
        'header. Nothing is to be paid.',
      resource: { url: request.resourceUrl, description, mimeType: 'application/json' },
      // x402 clients (wrapFetchWithSIWx) take the chain to sign for from accepts[0].network. This entry's scheme is no
      // payment scheme, its amount is 0 and its payTo nobody: a paying client finds nothing it can pay.
      accepts: [
        {
          scheme: SIGN_IN_SCHEME,
          network: this.options.network as `${string}:${string}`,
          amount: '0',
          asset: NOBODY,
          payTo: NOBODY,
          maxTimeoutSeconds: this.challengeSeconds,
          extra: {
            payment: 'none',
            note: 'Nothing to pay: this is a sign-in. Sign extensions["sign-in-with-x"] and send it in SIGN-IN-WITH-X.',
          },
        },
      ],
      extensions: { [SIGN_IN_WITH_X]: declaration },
    };
  }

  /**
   * The 402 answer to a request that needs a signed-in wallet (or, where `alternative` says so, a key) and sent
   * neither; `paymentSent` when it carried a PAYMENT-SIGNATURE, which is then neither used nor charged.
   */
  async challenge(
    request: SignInRequest,
    description: string,
    alternative = '',
    paymentSent = false,
  ): Promise<ApiError> {
    const required = await this.paymentRequired(request, description);
    const unpaid = paymentSent
      ? 'Nothing was charged: this request needs a signed-in wallet, not a payment, and the PAYMENT-SIGNATURE ' +
        'sent was not used. '
      : '';
    const route = `${request.method.toUpperCase()} ${new URL(request.resourceUrl).pathname}`;
    const message =
      `${unpaid}${alternative}Sign in with your wallet: sign the SIWX challenge in the PAYMENT-REQUIRED header ` +
      `(extensions["sign-in-with-x"], CAIP-122/EIP-4361, chain ${this.options.network}; its accepts entry of scheme ` +
      `"${SIGN_IN_SCHEME}" is not a payment) and send the signed message, base64 JSON, in the SIGN-IN-WITH-X ` +
      `header of this ` +
      `same request (${route}) within ${this.challengeSeconds} s; each challenge is accepted once, for the ` +
      `method and path it ` +
      'was issued for. The x402 client helpers wrapFetchWithSIWx and createSIWxClientHook do this.';
    const paymentRequired = encodePaymentRequiredHeader(required);
    return new ApiError(402, 'authentication_required', message, { paymentRequired, bearerChallenge: true });
  }

  /**
   * The wallet (lower-case 0x address) a SIGN-IN-WITH-X header proves for this request; otherwise the 401 saying why.
   */
  async verify(header: string, request: SignInRequest): Promise<string> {
    const payload = readPayload(header);
    if (payload.chainId !== this.options.network || payload.type !== 'eip191') {
      const accepted = `${this.options.network} with eip191 signatures`;
      throw invalid(
        `The message is signed for ${payload.chainId} (${payload.type}); this service accepts ${accepted}.`,
      );
    }
    if (!/^0x[0-9a-fA-F]{40}$/.test(payload.address))
      throw invalid("The message's address is not a 0x address of 40 hex digits.");
    if (!payload.expirationTime) throw invalid('The message has no expirationTime; sign the challenge as issued.');
    const valid = await clientError(() =>
      validateSIWxMessage(payload, this.origin(), { maxAge: this.challengeSeconds * 1000 }),
    );
    if (!valid.isValid) {
      if (['invalid_siwx_expired', 'invalid_siwx_issued_at_too_old'].includes(valid.invalidReason ?? ''))
        throw expired();
      throw invalid(`The message is not valid for this service: ${valid.invalidMessage}.`);
    }
    const target: SignInTarget = { method: request.method, uri: this.uriOf(request.resourceUrl) };
    this.assertSameResource(payload, target);
    // The nonce before any signature work: only a challenge this service issued for this request, unexpired and
    // unused, may cost a signature check (and a smart wallet's, a chain read).
    const nonce = await this.nonces.check(payload.nonce, target);
    if ('refusal' in nonce) throw nonceRefused(nonce.refusal, target);
    const message = await clientError(async () => createSIWxMessage(payload, payload.address));
    const refusal = await this.options.signatures.check(payload.address as Address, message, payload.signature);
    if (refusal) throw invalid(refusal);
    if (!(await this.nonces.redeem(payload.nonce, nonce.expiresAt))) throw nonceRefused({ kind: 'used' }, target);
    return payload.address.toLowerCase();
  }

  /** The signed message must name this request's resource, as its uri and as its only resource. */
  private assertSameResource(payload: SIWxPayload, target: SignInTarget): void {
    const resources = payload.resources ?? [];
    if (payload.uri === target.uri && resources.every((r) => r === target.uri)) return;
    const named = payload.uri !== target.uri ? payload.uri : resources.find((r) => r !== target.uri);
    throw wrongResource(`This signed message was issued for ${String(named).slice(0, 300)}`, target);
  }

  private uriOf(resourceUrl: string): string {
    const resource = new URL(resourceUrl);
    return new URL(resource.pathname, this.origin()).href;
  }

  private origin(): URL {
    return new URL(new URL(this.options.publicBaseUrl()).origin);
  }
}

/** The header's payload, its text fields strings of sane length with no line break (EIP-4361 lines), or a 401. */
function readPayload(header: string): SIWxPayload {
  let payload: SIWxPayload;
  try {
    payload = parseSIWxHeader(header.trim());
  } catch (e) {
    const why = String((e as Error)?.message).slice(0, 300);
    throw invalid(
      `The SIGN-IN-WITH-X header cannot be read (${why}). It must be the base64 JSON of the signed message.`,
    );
  }
  if (!payload || typeof payload !== 'object') throw invalid('The SIGN-IN-WITH-X header is not a JSON object.');
  for (const field of TEXT_FIELDS) {
    const value = (payload as unknown as Record<string, unknown>)[field];
    if (value === undefined) continue;
    if (typeof value !== 'string' || value.length > 2048 || /[\u0000-\u001f\u007f]/.test(value)) {
      throw invalid(
        `The message's ${field} must be text of at most 2048 characters without line breaks or control ` +
          'characters; sign the challenge as issued.',
      );
    }
  }
  const resources = payload.resources;
  if (
    resources !== undefined &&
    (!Array.isArray(resources) ||
      resources.length > 10 ||
      resources.some((r) => typeof r !== 'string' || r.length > 2048 || /[\u0000-\u001f\u007f]/.test(r)))
  ) {
    throw invalid("The message's resources must be a list of at most 10 URLs, as issued in the challenge.");
  }
  return payload;
}

/** What the package's validators and SIWE formatter throw on a malformed message is the client's error, never a 500. */
async function clientError<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (e) {
    throw invalid(
      `The signed message is malformed (${String((e as Error)?.message ?? e)
        .split('\n')[0]
        .slice(0, 200)}).`,
    );
  }
}

function wrongResource(reason: string, target: SignInTarget): ApiError {
  const path = new URL(target.uri).pathname;
  const route = `${target.method.toUpperCase()} ${path}`;
  return new ApiError(
    401,
    'siwx_wrong_resource',
    `${reason}, not for ${route}: a sign-in proves one request to the method and ` +
      `path its challenge was issued for. Ask ${route} again without SIGN-IN-WITH-X for a fresh challenge of ` +
      `its own, sign it ` +
      'and send it once.',
  );
}

function invalid(reason: string): ApiError {
  return new ApiError(401, 'siwx_invalid', `${reason} ${AGAIN}`);
}

function expired(): ApiError {
  return new ApiError(401, 'siwx_expired', `The signed message has expired. ${AGAIN}`);
}

function nonceRefused(refusal: NonceRefusal, target: SignInTarget): ApiError {
  if (refusal.kind === 'used') {
    return new ApiError(
      401,
      'siwx_nonce_used',
      `This challenge was already used; a signed message is accepted once. ${AGAIN}`,
    );
  }
  if (refusal.kind === 'expired') return expired();
  if (refusal.kind === 'other_method') {
    return wrongResource(
      `This signed message was issued for ${refusal.method} ${new URL(target.uri).pathname}`,
      target,
    );
  }
  return invalid("The message's nonce is not a challenge this service issued for this request.");
}
