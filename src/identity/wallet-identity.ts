import type { ApiKeys } from '../keys/index.js';
import type { Database } from '../store/index.js';
import { Callers } from './caller.js';
import { SelfServiceKeys, type SignupPolicy } from './self-service-keys.js';
import { SignInNonces } from './sign-in-nonces.js';
import { WalletSignIn, type WalletSignInOptions } from './wallet-sign-in.js';
import { WalletSignatures, type SignatureChain } from './wallet-signatures.js';

/** Everything wallet sign-in brings to the HTTP app: who is calling, and self-service keys. */
export interface WalletIdentity {
  signIn: WalletSignIn;
  callers: Callers;
  selfServiceKeys: SelfServiceKeys;
}

export type WalletIdentityOptions = Omit<WalletSignInOptions, 'signatures'> & {
  /** Budgeted, cached chain reads for smart-wallet signatures; without it only plain (EOA) wallets sign in. */
  chain?: SignatureChain;
  /** ERC-6492 factories a not-yet-deployed wallet may deploy with (none by default, as the x402 facilitator). */
  allowedFactories?: readonly string[];
};

/** Wallet sign-in and self-service keys, with the configured challenge lifetime and sign-up policy. */
export function walletIdentity(
  db: Database,
  keys: ApiKeys,
  options: WalletIdentityOptions,
  signup: SignupPolicy,
): WalletIdentity {
  const signIn = new WalletSignIn(new SignInNonces(db), {
    publicBaseUrl: options.publicBaseUrl,
    network: options.network,
    challengeSeconds: options.challengeSeconds,
    signatures: new WalletSignatures(options.chain, options.allowedFactories),
  });
  return { signIn, callers: new Callers(keys, signIn), selfServiceKeys: new SelfServiceKeys(db, keys, signup) };
}
