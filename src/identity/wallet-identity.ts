import type { ApiKeys } from '../keys/index.js';
import type { Database } from '../store/index.js';
import { Callers } from './caller.js';
import { SelfServiceKeys, type SignupPolicy } from './self-service-keys.js';
import { SignInNonces } from './sign-in-nonces.js';
import { WalletSignIn, type WalletSignInOptions } from './wallet-sign-in.js';

/** Everything wallet sign-in brings to the HTTP app: who is calling, and self-service keys. */
export interface WalletIdentity {
  signIn: WalletSignIn;
  callers: Callers;
  selfServiceKeys: SelfServiceKeys;
}

/** Wallet sign-in and self-service keys, with the configured challenge lifetime and sign-up policy. */
export function walletIdentity(db: Database, keys: ApiKeys, options: WalletSignInOptions, signup: SignupPolicy): WalletIdentity {
  const signIn = new WalletSignIn(new SignInNonces(db), options);
  return { signIn, callers: new Callers(keys, signIn), selfServiceKeys: new SelfServiceKeys(db, keys, signup) };
}
