import { hashDomain, isAddress, keccak256, toBytes, type Address, type Hex } from 'viem';
import type { Authorization } from './payment-gateway.js';

/** EIP-3009's typed data, as a wallet signs it (viem's hashTypedData and signTypedData take this form). */
export const TRANSFER_WITH_AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const;

/** The struct's type hash, as hashTypedData builds it from that list. */
const TRANSFER_TYPE_HASH = keccak256(
  toBytes(
    `TransferWithAuthorization(${TRANSFER_WITH_AUTHORIZATION_TYPES.TransferWithAuthorization.map((f) => `${f.type} ${f.name}`).join(',')})`,
  ),
  'bytes',
);
const DOMAIN_FIELDS = [
  { name: 'name', type: 'string' },
  { name: 'version', type: 'string' },
  { name: 'chainId', type: 'uint256' },
  { name: 'verifyingContract', type: 'address' },
] as const;
const UINT256_END = 1n << 256n;
const MAX_DOMAINS = 64;
const domainSeparators = new Map<string, Uint8Array>();

/** The token's EIP-712 domain (USDC's: name, version, chain, contract). */
export interface TokenDomain {
  name: string;
  version: string;
  chainId: number;
  verifyingContract: Address;
}

/**
 * The EIP-712 digest a TransferWithAuthorization signature signs: viem's hashTypedData for this one type, which costs
 * about 0.3 ms per call in its generic encoder, written out (its domain separator kept per token). Throws on what
 * hashTypedData refuses: an address that is not one (or fails its checksum), a number outside uint256, a nonce that is
 * not 32 bytes. test/transfer-digest.test.ts compares both.
 */
export function transferDigest(domain: TokenDomain, message: Authorization): Hex {
  const struct = new Uint8Array(7 * 32);
  struct.set(TRANSFER_TYPE_HASH, 0);
  struct.set(addressWord(message.from), 32);
  struct.set(addressWord(message.to), 64);
  struct.set(uintWord(message.value), 96);
  struct.set(uintWord(message.validAfter), 128);
  struct.set(uintWord(message.validBefore), 160);
  struct.set(bytes32Word(message.nonce), 192);
  const signed = new Uint8Array(66);
  signed.set([0x19, 0x01], 0);
  signed.set(domainSeparator(domain), 2);
  signed.set(keccak256(struct, 'bytes'), 34);
  return keccak256(signed);
}

function domainSeparator(domain: TokenDomain): Uint8Array {
  const key = `${domain.name}\n${domain.version}\n${domain.chainId}\n${domain.verifyingContract}`;
  let separator = domainSeparators.get(key);
  if (!separator) {
    separator = toBytes(
      hashDomain({ domain: { ...domain, chainId: BigInt(domain.chainId) }, types: { EIP712Domain: DOMAIN_FIELDS } }),
    );
    if (domainSeparators.size >= MAX_DOMAINS) domainSeparators.delete(domainSeparators.keys().next().value!);
    domainSeparators.set(key, separator);
  }
  return separator;
}

function addressWord(address: string): Uint8Array {
  if (!isAddress(address)) throw new Error(`not an address: ${address}`);
  return hexWord(address.slice(2));
}

function uintWord(decimal: string): Uint8Array {
  const value = BigInt(decimal);
  if (value < 0n || value >= UINT256_END) throw new Error(`outside uint256: ${decimal}`);
  return hexWord(value.toString(16));
}

function bytes32Word(hex: string): Uint8Array {
  if (!/^0x[0-9a-fA-F]{64}$/.test(hex)) throw new Error(`not 32 bytes: ${hex}`);
  return hexWord(hex.slice(2));
}

/** A 32-byte big-endian word from hex digits (left-padded with zeros). */
function hexWord(digits: string): Uint8Array {
  return Uint8Array.from(Buffer.from(digits.padStart(64, '0'), 'hex'));
}
