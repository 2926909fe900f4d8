import { recoverMessageAddress, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';

/**
 * Ownership proofs as x402scan and agentcash read them (`ownershipProofs` in /.well-known/x402, `x-discovery` in
 * OpenAPI): the payTo wallet's EIP-191 signature (personal_sign) of the site's origin, such as
 * "https://audio.example.com" (scheme, host and port only, no trailing slash). Anyone recovers the signer from the
 * signature and the origin and compares it with the payTo of the 402.
 */
export const PROOF_PATTERN = /^0x[0-9a-fA-F]{130}$/;

/** The origin a proof signs: that of the public base URL (…/api/v1 or the bare site). */
export function proofOrigin(publicBaseUrl: string): string {
  return new URL(publicBaseUrl).origin;
}

export async function signOwnershipProof(privateKey: Hex, origin: string): Promise<Hex> {
  return privateKeyToAccount(privateKey).signMessage({ message: origin });
}

/** Whether the proof is payTo's signature of this origin. */
export async function provesOwnership(proof: string, origin: string, payTo: string): Promise<boolean> {
  if (!PROOF_PATTERN.test(proof)) return false;
  try {
    const signer = await recoverMessageAddress({ message: origin, signature: proof as Hex });
    return signer.toLowerCase() === payTo.toLowerCase();
  } catch {
    return false;
  }
}
