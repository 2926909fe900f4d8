import {
  encodeDeployData,
  encodeFunctionData,
  hashMessage,
  isAddressEqual,
  isErc6492Signature,
  parseAbi,
  parseErc6492Signature,
  recoverMessageAddress,
  universalSignatureValidatorAbi,
  universalSignatureValidatorByteCode,
  type Address,
  type Hex,
} from 'viem';

/** The chain reads a smart-wallet signature needs (budgeted and cached by the caller: src/payments ChainChecks). */
export interface SignatureChain {
  hasCode(address: Address): Promise<boolean>;
  call(address: Address, request: { to?: Address; data: Hex }): Promise<Hex | undefined>;
}

/** Why a signature was refused, in words an agent can act on; undefined when it is valid. */
export type SignatureRefusal = string | undefined;

const erc1271 = parseAbi(['function isValidSignature(bytes32 hash, bytes signature) view returns (bytes4)']);
const MAGIC = '0x1626ba7e';
const HEX = /^0x(?:[0-9a-fA-F]{2})+$/;

/**
 * Whether `address` signed `message` (EIP-191), the way the x402 facilitator judges payment signatures: a plain
 * signature that recovers to the address is valid without the chain; an ERC-6492 wrapper is refused unless its
 * factory is allowed; otherwise only an address with code (a deployed smart wallet) is asked on chain (EIP-1271).
 */
export class WalletSignatures {
  private readonly factories: Set<string>;

  constructor(
    private readonly chain: SignatureChain | undefined,
    allowedFactories: readonly string[] = [],
  ) {
    this.factories = new Set(allowedFactories.map((f) => f.toLowerCase()));
  }

  async check(address: Address, message: string, signature: string): Promise<SignatureRefusal> {
    if (!HEX.test(signature) || signature.length > 20_000) return 'The signature is not hex.';
    const sig = signature as Hex;
    if (isErc6492Signature(sig)) return this.counterfactual(address, message, sig);
    if (await recovers(address, message, sig)) return undefined;
    const notSigned = `The signature is not by ${address}: sign the message with the wallet it names.`;
    if (!this.chain || !(await this.chain.hasCode(address))) return notSigned;
    return (await this.acceptedByContract(address, message, sig)) ? undefined : notSigned;
  }

  /** ERC-6492: a wallet not deployed yet, whose factory would run in our eth_call; only allowed factories may. */
  private async counterfactual(address: Address, message: string, sig: Hex): Promise<SignatureRefusal> {
    let parsed: ReturnType<typeof parseErc6492Signature>;
    try {
      parsed = parseErc6492Signature(sig);
    } catch {
      return 'The ERC-6492 signature cannot be read.';
    }
    const factory = parsed.address;
    if (!factory || !this.factories.has(factory.toLowerCase())) {
      return (
        `The ERC-6492 signature deploys its wallet with factory ${factory ?? '(none)'}, which this service does not ` +
        'allow. Sign with a deployed wallet or a plain (EOA) wallet.'
      );
    }
    if (!this.chain) return 'Smart-wallet signatures cannot be checked here (no chain is configured).';
    if (await this.chain.hasCode(address)) {
      return (await this.acceptedByContract(address, message, parsed.signature))
        ? undefined
        : `The signature is not by ${address}.`;
    }
    const data = encodeDeployData({
      abi: universalSignatureValidatorAbi,
      bytecode: universalSignatureValidatorByteCode,
      args: [address, hashMessage(message), sig],
    });
    const answer = await this.chain.call(address, { data });
    return answer !== undefined && /^0x0*1$/.test(answer) ? undefined : `The signature is not by ${address}.`;
  }

  private async acceptedByContract(address: Address, message: string, sig: Hex): Promise<boolean> {
    const data = encodeFunctionData({
      abi: erc1271,
      functionName: 'isValidSignature',
      args: [hashMessage(message), sig],
    });
    const answer = await this.chain!.call(address, { to: address, data });
    return answer !== undefined && answer.toLowerCase().startsWith(MAGIC);
  }
}

async function recovers(address: Address, message: string, sig: Hex): Promise<boolean> {
  try {
    return isAddressEqual(await recoverMessageAddress({ message, signature: sig }), address);
  } catch {
    return false;
  }
}
