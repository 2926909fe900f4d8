import { secp256k1 } from '@noble/curves/secp256k1';

type RecoverPublicKey = typeof secp256k1.Signature.prototype.recoverPublicKey;
type RecoveredPoint = ReturnType<RecoverPublicKey>;
type MessageHash = Parameters<RecoverPublicKey>[0];

const MAX_REMEMBERED = 256;
let installed = false;

/**
 * Makes every secp256k1 public-key recovery in this process (viem's recoverAddress, and so x402's own signature checks)
 * remember its last few answers. A paid purchase recovers the payer's signature three times — the precheck, the
 * facilitator's verify and the verify inside its settle, which call viem directly — and each recovery is a few ms of
 * pure-JS curve maths. Recovery is a pure function of (r, s, recovery bit, message hash) and its point is immutable,
 * so the answer for the same inputs is the same: the maths runs once per payment. Failures are not remembered.
 */
export function shareSignatureRecoveries(): void {
  if (installed) return;
  installed = true;
  const prototype = secp256k1.Signature.prototype;
  const recover: RecoverPublicKey = prototype.recoverPublicKey;
  const remembered = new Map<string, RecoveredPoint>();
  prototype.recoverPublicKey = function rememberedRecovery(this: typeof prototype, messageHash: MessageHash) {
    const key = `${this.r.toString(16)} ${this.s.toString(16)} ${this.recovery} ${hexOf(messageHash)}`;
    const known = remembered.get(key);
    if (known) return known;
    const point = recover.call(this, messageHash);
    if (remembered.size >= MAX_REMEMBERED) remembered.delete(remembered.keys().next().value!);
    remembered.set(key, point);
    return point;
  };
}

function hexOf(value: MessageHash): string {
  if (value instanceof Uint8Array) return Buffer.from(value).toString('hex');
  return String(value).toLowerCase().replace(/^0x/, '');
}
