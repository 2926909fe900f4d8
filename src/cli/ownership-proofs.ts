import { DEV_ROLES } from '../chain/index.js';
import { proofOrigin, provesOwnership, signOwnershipProof } from '../http/ownership-proof.js';
import type { Logger } from '../log/index.js';

export interface ProofSettings {
  /** X402_OWNERSHIP_PROOFS as configured. */
  configured: readonly string[];
  /** The payTo of the 402s; none while machine payment is not configured. */
  payTo?: string;
  /** The API's public address (…/api/v1): its origin is what a proof signs. */
  publicBaseUrl: string;
  production: boolean;
  log: Logger;
}

/**
 * The ownership proofs the discovery documents carry: the configured ones that are payTo's signature of the public
 * origin (another origin's or another wallet's would make crawlers distrust the site, so it is left out, with a
 * warning); in development, where payTo is the local chain's account and its key is known, one signed here.
 */
export async function servedOwnershipProofs(settings: ProofSettings): Promise<string[]> {
  const { configured, payTo, log } = settings;
  if (!payTo) return [];
  const origin = proofOrigin(settings.publicBaseUrl);
  if (configured.length) {
    const valid: string[] = [];
    for (const proof of configured) {
      if (await provesOwnership(proof, origin, payTo)) valid.push(proof);
      else
        log.warn(
          { component: 'discovery', origin, pay_to: payTo },
          `X402_OWNERSHIP_PROOFS: ${proof.slice(0, 12)}… is not X402_PAY_TO's signature of ${origin}, so it ` +
            `is not published; make one with agent-audio ownership-proof`,
        );
    }
    return valid;
  }
  if (!settings.production && payTo.toLowerCase() === DEV_ROLES.payTo.address.toLowerCase())
    return [await signOwnershipProof(DEV_ROLES.payTo.privateKey, origin)];
  return [];
}
