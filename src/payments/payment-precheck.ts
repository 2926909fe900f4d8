import {
  encodeFunctionData,
  getAddress,
  isAddressEqual,
  isErc6492Signature,
  parseAbi,
  parseErc6492Signature,
  recoverAddress,
  type Address,
  type Hex,
} from 'viem';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { shareSignatureRecoveries } from './recovery-memo.js';
import type { Authorization } from './payment-gateway.js';
import { transferDigest } from './transfer-digest.js';

/** Chain reads for smart-wallet payers (src/payments ChainChecks: cached, budgeted, gas-capped). */
export interface CodeLookup {
  hasCode(address: Address): Promise<boolean>;
  call(address: Address, request: { to?: Address; data: Hex }): Promise<Hex | undefined>;
}

const erc1271 = parseAbi(['function isValidSignature(bytes32 hash, bytes signature) view returns (bytes4)']);

/** The facilitator refuses an authorization valid for less than this long (x402 "exact" EVM). */
const MIN_VALIDITY_SECONDS = 6n;

/**
 * What can be said of an x402 "exact" EVM payment without the chain, checked before the facilitator is asked (whose
 * verify reads the chain several times): the authorization pays exactly these requirements, is valid now, and is
 * signed by its `from`. A signature that recovers to another address is refused unless `from` holds code (a smart
 * wallet) whose EIP-1271 check, asked with a gas cap and within the budget, accepts it: the facilitator then asks it
 * again without a cap, so only signatures the wallet accepts get that far. An ERC-6492 wrapper passes only with an
 * allowed factory, as the facilitator's own rule.
 */
export class PaymentPrecheck {
  private readonly factories: Set<string>;

  constructor(
    private readonly code?: CodeLookup,
    allowedFactories: readonly string[] = [],
  ) {
    this.factories = new Set(allowedFactories.map((f) => f.toLowerCase()));
    // The facilitator recovers the same signature again: it then reads this recovery.
    shareSignatureRecoveries();
  }

  /** Why the payment cannot be valid, or undefined when only the facilitator can tell. */
  async refusal(
    requirements: PaymentRequirements,
    payload: PaymentPayload,
    now = Math.floor(Date.now() / 1000),
  ): Promise<string | undefined> {
    const { signature, authorization: a } = payload.payload as { signature: Hex; authorization: Authorization };
    const { scheme, network } = payload.accepted;
    if (scheme !== 'exact' || network !== requirements.network) {
      return `the payment is for ${scheme} on ${network}, not exact on ${requirements.network}`;
    }
    if (!isAddressEqual(a.to as Address, requirements.payTo as Address))
      return `the authorization pays ${a.to}, not ${requirements.payTo}`;
    if (BigInt(a.value) !== BigInt(requirements.amount))
      return `the authorization moves ${a.value} atomic units, not ${requirements.amount}`;
    if (BigInt(a.validAfter) > BigInt(now)) return `the authorization is valid only after ${a.validAfter}`;
    if (BigInt(a.validBefore) < BigInt(now) + MIN_VALIDITY_SECONDS)
      return `the authorization expired (validBefore ${a.validBefore})`;
    if (isErc6492Signature(signature)) {
      const factory = safely(() => parseErc6492Signature(signature).address);
      if (factory && this.factories.has(factory.toLowerCase())) return undefined;
      return `the ERC-6492 signature deploys its wallet with factory ${factory ?? '(none)'}, which is not allowed`;
    }
    const digest = safely(() =>
      transferDigest(
        {
          name: String(requirements.extra?.name),
          version: String(requirements.extra?.version),
          chainId: Number(requirements.network.split(':')[1]),
          verifyingContract: getAddress(requirements.asset),
        },
        a,
      ),
    );
    if (!digest) return 'the authorization cannot be hashed (EIP-712)';
    const signer = await safely(() => recoverAddress({ hash: digest, signature }));
    if (signer && isAddressEqual(signer, a.from as Address)) return undefined;
    // Not by `from` itself: only a smart wallet at `from` could still accept it.
    const from = a.from as Address;
    if (!this.code || !(await this.code.hasCode(from))) return `the signature is not by ${a.from}`;
    const data = encodeFunctionData({ abi: erc1271, functionName: 'isValidSignature', args: [digest, signature] });
    const answer = await this.code.call(from, { to: from, data });
    return answer?.toLowerCase().startsWith('0x1626ba7e')
      ? undefined
      : `the wallet contract at ${a.from} does not accept the signature`;
  }
}

function safely<T>(work: () => T): T | undefined {
  try {
    const result = work();
    return result instanceof Promise ? (result.catch(() => undefined) as T) : result;
  } catch {
    return undefined;
  }
}
