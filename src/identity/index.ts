export { Callers, type Caller, type Credentials } from './caller.js';
export { SelfServiceKeys, type SignupPolicy } from './self-service-keys.js';
export { SignInNonces } from './sign-in-nonces.js';
export { MAX_CHALLENGE_SECONDS, SIGN_IN_HEADER, WalletSignIn, type WalletSignInOptions } from './wallet-sign-in.js';
export { walletIdentity, type WalletIdentity } from './wallet-identity.js';
