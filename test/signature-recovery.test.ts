import assert from 'node:assert/strict';
import { test } from 'node:test';
import { keccak256, recoverAddress, toHex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { shareSignatureRecoveries } from '../src/payments/recovery-memo.js';

test('a remembered signature recovery answers exactly what the curve maths does', async () => {
  shareSignatureRecoveries();
  const alice = privateKeyToAccount(generatePrivateKey());
  const bob = privateKeyToAccount(generatePrivateKey());
  const hash = keccak256(toHex('a transfer'));
  const other = keccak256(toHex('another transfer'));
  const byAlice = await alice.sign({ hash });
  const byBob = await bob.sign({ hash });
  for (let round = 0; round < 3; round++) {
    assert.equal(await recoverAddress({ hash, signature: byAlice }), alice.address);
    assert.equal(await recoverAddress({ hash, signature: byBob }), bob.address);
    // The same signature over another message recovers to someone else: the hash is part of what is remembered.
    assert.notEqual(await recoverAddress({ hash: other, signature: byAlice }), alice.address);
  }
  // The recovery bit is too: flipped, the same r and s name another key.
  const flipped = `${byAlice.slice(0, -2)}${byAlice.endsWith('1b') ? '1c' : '1b'}` as `0x${string}`;
  assert.notEqual(await recoverAddress({ hash, signature: flipped }).catch(() => 'none'), alice.address);
  // More payments than are remembered: the oldest are recovered again, still right.
  const hashes = Array.from({ length: 300 }, (_, i) => keccak256(toHex(`payment ${i}`)));
  const signatures = await Promise.all(hashes.map((h) => alice.sign({ hash: h })));
  for (const [i, h] of hashes.entries())
    assert.equal(await recoverAddress({ hash: h, signature: signatures[i] }), alice.address);
  assert.equal(await recoverAddress({ hash: hashes[0], signature: signatures[0] }), alice.address);
});

test('a remembered recovery costs no curve maths', async () => {
  shareSignatureRecoveries();
  const account = privateKeyToAccount(generatePrivateKey());
  const hash = keccak256(toHex('timed once'));
  const signature = await account.sign({ hash });
  const { secp256k1 } = await import('@noble/curves/secp256k1');
  const point = secp256k1.ProjectivePoint.BASE;
  const multiply = point.multiplyAndAddUnsafe;
  let calls = 0;
  Object.getPrototypeOf(point).multiplyAndAddUnsafe = function (...args: Parameters<typeof multiply>) {
    calls++;
    return multiply.apply(this, args);
  };
  try {
    await recoverAddress({ hash, signature });
    await recoverAddress({ hash, signature });
    await recoverAddress({ hash, signature });
  } finally {
    Object.getPrototypeOf(point).multiplyAndAddUnsafe = multiply;
  }
  assert.equal(calls, 1);
});
