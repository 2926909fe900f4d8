import type { ApiKey, ApiKeys } from '../keys/index.js';
import type { WalletSignIn } from './wallet-sign-in.js';

/** Who is calling: an agent API key, or a wallet that signed in (lower-case 0x address). */
export type Caller = { kind: 'api_key'; key: ApiKey } | { kind: 'wallet'; address: string };

/** What a request brings to say who it is, and the public URL of the resource it asks for (for the challenge). */
export interface Credentials {
  /** The Authorization header, if any. */
  authorization?: string;
  /** The SIGN-IN-WITH-X header, if any. */
  signIn?: string;
  /** Whether a PAYMENT-SIGNATURE came too (it is not used for a sign-in: the challenge says nothing was charged). */
  paymentSent?: boolean;
  /**
   * The request's method and the public URL of its resource: a sign-in is accepted only for those it was issued for.
   */
  method: string;
  resourceUrl: string;
  /** What the resource is, shown in the sign-in challenge. */
  description: string;
}

/** The one place that decides who a request comes from (HTTP routes; the MCP transport may use it too). */
export class Callers {
  constructor(
    private readonly keys: ApiKeys,
    private readonly signIn?: WalletSignIn,
  ) {}

  /**
   * The bearer key when Authorization is sent (401 if it is not valid), else the wallet of a valid SIGN-IN-WITH-X
   * (401 if not); with neither, the 402 sign-in challenge — or 401 where wallet sign-in is not set up.
   */
  async resolve(credentials: Credentials): Promise<Caller> {
    if (credentials.authorization || !this.signIn)
      return { kind: 'api_key', key: await this.keys.authenticate(credentials.authorization) };
    if (credentials.signIn)
      return { kind: 'wallet', address: await this.signIn.verify(credentials.signIn, credentials) };
    const alternative =
      'Send your agent API key as "Authorization: Bearer <key>", or sign in with the wallet that paid. ';
    throw await this.signIn.challenge(credentials, credentials.description, alternative, credentials.paymentSent);
  }

  /** A signed-in wallet only (an API key does not stand for a wallet): its address, or the 402 challenge, or 401. */
  async wallet(credentials: Credentials): Promise<string> {
    if (!this.signIn) throw new Error('wallet sign-in is not set up');
    if (credentials.signIn) return this.signIn.verify(credentials.signIn, credentials);
    throw await this.signIn.challenge(credentials, credentials.description, '', credentials.paymentSent);
  }
}
