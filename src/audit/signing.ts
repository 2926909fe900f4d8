import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { canonicalJson, sha256 } from './canonical.js';

export const HEAD_TYPE = 'agent-audio.audit-head/1';

/** What the operator signs: the chain up to seq ends in chain_hash. */
export interface HeadStatement {
  type: typeof HEAD_TYPE;
  seq: string;
  chain_hash: string;
  signed_at: string;
  key_id: string;
}

/**
 * What the operator signs for the public: the chain passes through chain_hash. Without the seq, which is the number
 * of records (every quote, order state and upgrade): a competitor would read sales volume from it. A hash chain's
 * link names its place as well as a seq does, so an auditor's proof is the same.
 */
export const CHECKPOINT_TYPE = 'agent-audio.audit-checkpoint/1';
export interface CheckpointStatement {
  type: typeof CHECKPOINT_TYPE;
  chain_hash: string;
  signed_at: string;
  key_id: string;
}

/** A signed chain checkpoint as published at GET /audit/head and kept by auditors. */
export interface SignedCheckpoint {
  head: CheckpointStatement;
  signature: string;
  public_key: string;
}

/** A signed chain head as kept in audit_signed_heads, shown by `audit head` and carried by bundles. */
export interface SignedHead {
  head: HeadStatement;
  /** Ed25519 over the canonical JSON of head, base64. */
  signature: string;
  /** The operator's public key (SPKI PEM); trust it only if it matches the key the operator published. */
  public_key: string;
}

export function keyIdOf(publicKey: KeyObject): string {
  return sha256(publicKey.export({ type: 'spki', format: 'der' }).toString('base64'));
}

export function publicKeyPem(publicKey: KeyObject): string {
  return publicKey.export({ type: 'spki', format: 'pem' }).toString();
}

/** Signs chain heads with the operator's Ed25519 key. The private key never leaves this object. */
export class HeadSigner {
  readonly publicKey: KeyObject;
  readonly keyId: string;
  readonly publicKeyPem: string;

  constructor(private readonly privateKey: KeyObject) {
    if (privateKey.asymmetricKeyType !== 'ed25519')
      throw new Error('the audit signing key must be an Ed25519 private key');
    this.publicKey = createPublicKey(privateKey);
    this.keyId = keyIdOf(this.publicKey);
    this.publicKeyPem = publicKeyPem(this.publicKey);
  }

  /** An Ed25519 signature of any bytes: the offers and receipts agents keep are signed with the same operator key. */
  signBytes(data: Uint8Array): Buffer {
    return sign(null, data, this.privateKey);
  }

  sign(seq: string, chainHash: string, at = new Date()): SignedHead {
    const head: HeadStatement = {
      type: HEAD_TYPE,
      seq,
      chain_hash: chainHash,
      signed_at: at.toISOString(),
      key_id: this.keyId,
    };
    const signature = sign(null, Buffer.from(canonicalJson(head), 'utf8'), this.privateKey).toString('base64');
    return { head, signature, public_key: this.publicKeyPem };
  }

  /** The public form of a signed head: the same link and time, without the record count. */
  checkpoint(of: HeadStatement): SignedCheckpoint {
    const head: CheckpointStatement = {
      type: CHECKPOINT_TYPE,
      chain_hash: of.chain_hash,
      signed_at: of.signed_at,
      key_id: this.keyId,
    };
    const signature = sign(null, Buffer.from(canonicalJson(head), 'utf8'), this.privateKey).toString('base64');
    return { head, signature, public_key: this.publicKeyPem };
  }
}

/**
 * Why a signed head cannot be trusted, or undefined when its signature holds. With `trusted`, the head must be
 * signed by that key (the operator's published key), not merely by the key it carries.
 */
export function signedHeadProblem(signed: SignedHead | SignedCheckpoint, trusted?: KeyObject): string | undefined {
  const head = signed?.head;
  if (!head || typeof head.chain_hash !== 'string') return 'not a signed audit head';
  if (head.type === HEAD_TYPE ? typeof head.seq !== 'string' : head.type !== CHECKPOINT_TYPE)
    return 'not a signed audit head';
  let key: KeyObject;
  try {
    key = trusted ?? createPublicKey(signed.public_key);
  } catch {
    return 'its public key does not parse';
  }
  if (trusted && signed.public_key && keyIdOf(createPublicKey(signed.public_key)) !== keyIdOf(trusted))
    return `it carries another public key than the operator's (${keyIdOf(trusted)})`;
  if (head.key_id !== keyIdOf(key)) return `it names key ${head.key_id}, not ${keyIdOf(key)}`;
  const ok = verify(
    null,
    Buffer.from(canonicalJson(head), 'utf8'),
    key,
    Buffer.from(String(signed.signature), 'base64'),
  );
  return ok ? undefined : 'its signature does not verify: the head was altered or signed by another key';
}

export const SIGNING_KEY_FILE = 'audit-signing-key.pem';

function parseKey(text: string): KeyObject {
  const trimmed = text.trim();
  if (trimmed.includes('-----BEGIN')) return createPrivateKey(trimmed);
  const der = Buffer.from(trimmed, 'base64');
  const decoded = der.toString('utf8');
  if (decoded.includes('-----BEGIN')) return createPrivateKey(decoded);
  return createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
}

/**
 * The operator key: AUDIT_SIGNING_KEY (PEM, or base64 of a PEM or of PKCS#8 DER), else AUDIT_SIGNING_KEY_FILE,
 * else in development DATA_DIR/audit-signing-key.pem (generated with mode 0600 when `create` and missing).
 * Undefined when there is none. Errors never include the key.
 */
export async function loadSigningKey(options: {
  dataDir: string;
  production: boolean;
  create: boolean;
  key?: string;
  keyFile?: string;
}): Promise<HeadSigner | undefined> {
  const fromText = (text: string, source: string) => {
    try {
      return new HeadSigner(parseKey(text));
    } catch (e) {
      throw new Error(
        `${source} is not a usable Ed25519 private key (${(e as Error).message.replace(/-----[\s\S]*/, '')})`,
      );
    }
  };
  if (options.key) return fromText(options.key, 'AUDIT_SIGNING_KEY');
  if (options.keyFile)
    return fromText(await readFile(options.keyFile, 'utf8'), `AUDIT_SIGNING_KEY_FILE ${options.keyFile}`);
  if (options.production) return undefined;
  const file = join(options.dataDir, SIGNING_KEY_FILE);
  const existing = await readFile(file, 'utf8').catch(() => undefined);
  if (existing) return fromText(existing, file);
  if (!options.create) return undefined;
  const { privateKey } = generateKeyPairSync('ed25519');
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  try {
    await writeFile(file, pem, { mode: 0o600, flag: 'wx' });
  } catch (e) {
    if ((e as { code?: string }).code !== 'EEXIST') throw e;
    return fromText(await readFile(file, 'utf8'), file);
  }
  return new HeadSigner(privateKey);
}
