import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { getAddress, hashTypedData, type Address, type Hex } from 'viem';
import type { Authorization } from '../src/payments/payment-gateway.js';
import {
  TRANSFER_WITH_AUTHORIZATION_TYPES,
  transferDigest,
  type TokenDomain,
} from '../src/payments/transfer-digest.js';

const types = TRANSFER_WITH_AUTHORIZATION_TYPES;

/** viem's generic EIP-712 hashing, which the precheck used before transferDigest. */
function viemDigest(domain: TokenDomain, a: Authorization): Hex {
  return hashTypedData({
    domain,
    types,
    primaryType: 'TransferWithAuthorization',
    message: {
      from: a.from as Address,
      to: a.to as Address,
      value: BigInt(a.value),
      validAfter: BigInt(a.validAfter),
      validBefore: BigInt(a.validBefore),
      nonce: a.nonce as Hex,
    },
  });
}

const address = () => getAddress(`0x${randomBytes(20).toString('hex')}`);
const uint = (bytes: number) => BigInt(`0x${randomBytes(bytes).toString('hex')}`).toString();
const domain = (): TokenDomain => ({
  name: randomBytes(6).toString('base64url'),
  version: String(randomBytes(1)[0]),
  chainId: randomBytes(2).readUInt16BE(),
  verifyingContract: address(),
});
const authorization = (): Authorization => ({
  from: address(),
  to: address().toLowerCase(),
  value: uint(8),
  validAfter: uint(2),
  validBefore: uint(32),
  nonce: `0x${randomBytes(32).toString('hex')}`,
});

const outcome = (hash: () => Hex) => {
  try {
    return hash();
  } catch {
    return 'refused';
  }
};

describe('transferDigest', () => {
  test('signs the same digest as viem hashTypedData, across tokens and authorizations', () => {
    const usdc: TokenDomain = {
      name: 'USD Coin',
      version: '2',
      chainId: 8453,
      verifyingContract: getAddress('0x833589fcd6edb6e08f4c7c32d4f71b54bda02913'),
    };
    for (let i = 0; i < 200; i++) {
      const token = i % 2 ? usdc : domain();
      const a = authorization();
      assert.equal(transferDigest(token, a), viemDigest(token, a), JSON.stringify({ token, a }));
    }
    const edges = { ...authorization(), value: '0', validAfter: '0', validBefore: (2n ** 256n - 1n).toString() };
    assert.equal(transferDigest(usdc, edges), viemDigest(usdc, edges));
  });

  test('refuses what viem refuses: bad addresses and checksums, numbers outside uint256, short nonces', () => {
    const token = domain();
    const good = authorization();
    const mixed = getAddress(address());
    const badChecksum = mixed.slice(0, -1) + (mixed.endsWith('a') ? 'B' : mixed.endsWith('A') ? 'b' : 'a');
    const cases: Array<Partial<Authorization>> = [
      { from: '0x1234' },
      { to: `${good.to}00` },
      { from: badChecksum },
      { value: (2n ** 256n).toString() },
      { value: '-1' },
      { validBefore: 'soon' },
      { nonce: '0x1234' },
    ];
    for (const change of cases) {
      const a = { ...good, ...change };
      assert.equal(
        outcome(() => transferDigest(token, a)),
        'refused',
        JSON.stringify(change),
      );
      assert.equal(
        outcome(() => viemDigest(token, a)),
        'refused',
        `viem too: ${JSON.stringify(change)}`,
      );
    }
    // viem hashes a nonce of non-hex digits as garbage bytes; the payment's shape (src/payments/payment-shape.ts)
    // refuses it before the precheck, and so does this.
    assert.equal(
      outcome(() => transferDigest(token, { ...good, nonce: `0x${'zz'.repeat(32)}` })),
      'refused',
    );
  });
});
