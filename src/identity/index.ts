export { Callers, type Caller, type Credentials } from './caller.js';
export { SelfServiceKeys, type SignupPolicy } from './self-service-keys.js';
export { SignInNonces } from './sign-in-nonces.js';
export {
  MAX_CHALLENGE_SECONDS,
  SIGN_IN_HEADER,
  SIGN_IN_SCHEME,
  WalletSignIn,
  type WalletSignInOptions,
} from './wallet-sign-in.js';
export { WalletSignatures, type SignatureChain } from './wallet-signatures.js';
export { walletIdentity, type WalletIdentity, type WalletIdentityOptions } from './wallet-identity.js';
export { credentialsOf } from './request-credentials.js';
