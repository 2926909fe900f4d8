import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { loadSigningKey, signedHeadProblem } from '../src/audit/index.js';
import { scratchDir } from './support/service.js';

describe('the operator signing key', () => {
  test('development: generated once into DATA_DIR with mode 0600, then reused', async () => {
    const dataDir = await scratchDir('audit-key-');
    assert.equal(
      await loadSigningKey({ dataDir, production: false, create: false }),
      undefined,
      'a CLI never creates one',
    );
    const first = await loadSigningKey({ dataDir, production: false, create: true });
    const file = join(dataDir, 'audit-signing-key.pem');
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    const again = await loadSigningKey({ dataDir, production: false, create: true });
    assert.equal(again!.keyId, first!.keyId);
    assert.match(await readFile(file, 'utf8'), /BEGIN PRIVATE KEY/);
  });

  test('production: from AUDIT_SIGNING_KEY (PEM or base64) or AUDIT_SIGNING_KEY_FILE, never generated, never echoed', async () => {
    const dataDir = await scratchDir('audit-key-');
    const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const der = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'der' }).toString('base64');
    assert.equal(await loadSigningKey({ dataDir, production: true, create: true }), undefined);
    const fromPem = await loadSigningKey({ dataDir, production: true, create: true, key: pem });
    const fromBase64Pem = await loadSigningKey({
      dataDir,
      production: true,
      create: true,
      key: Buffer.from(pem).toString('base64'),
    });
    assert.equal(fromBase64Pem!.keyId, fromPem!.keyId);
    assert.ok(await loadSigningKey({ dataDir, production: true, create: true, key: der }));
    const file = join(dataDir, 'operator.pem');
    await writeFile(file, pem, { mode: 0o600 });
    assert.equal(
      (await loadSigningKey({ dataDir, production: true, create: true, keyFile: file }))!.keyId,
      fromPem!.keyId,
    );

    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 })
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString();
    await assert.rejects(loadSigningKey({ dataDir, production: true, create: true, key: rsa }), (e: Error) => {
      assert.match(e.message, /AUDIT_SIGNING_KEY is not a usable Ed25519 private key/);
      assert.ok(!e.message.includes(rsa.split('\n')[1]), 'the key is not in the message');
      return true;
    });
  });

  test('a signed head verifies under its key, and not when altered or under another key', async () => {
    const signer = (await loadSigningKey({
      dataDir: await scratchDir('audit-key-'),
      production: false,
      create: true,
    }))!;
    const other = (await loadSigningKey({ dataDir: await scratchDir('audit-key-'), production: false, create: true }))!;
    const signed = signer.sign('42', `sha256:${'a'.repeat(64)}`);
    assert.equal(signedHeadProblem(signed, signer.publicKey), undefined);
    assert.equal(signedHeadProblem(signed), undefined);
    assert.match(
      signedHeadProblem({ ...signed, head: { ...signed.head, seq: '43' } }, signer.publicKey)!,
      /does not verify/,
    );
    assert.match(signedHeadProblem(signed, other.publicKey)!, /another public key/);
    assert.match(signedHeadProblem({ ...signed, public_key: other.publicKeyPem })!, /names key/);
  });
});
