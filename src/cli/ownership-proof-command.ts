import { readFileSync } from 'node:fs';
import type { Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { proofOrigin, signOwnershipProof } from '../http/ownership-proof.js';
import { option, print, type Command } from './command-line.js';
import type { Config } from './config.js';

/** The private key in the file, or why it cannot be used. */
function readKey(file: string): Hex | string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (e) {
    return `--key-file ${file} cannot be read: ${(e as Error).message}`;
  }
  return /^0x[0-9a-fA-F]{64}$/.test(text)
    ? (text as Hex)
    : `--key-file ${file} must hold one 0x-prefixed 32-byte hex private key`;
}

/** --origin, else PUBLIC_BASE_URL's: the origin agents reach the site at. */
function originOf(config: Config, args: string[]): string | undefined {
  const given = option(args, '--origin') ?? config.publicBaseUrl;
  if (!given) return undefined;
  try {
    return proofOrigin(given);
  } catch {
    return undefined;
  }
}

/** Signs the origin with payTo's key, on the operator's machine: the service never holds that key. */
export const ownershipProofCommands: Record<string, Command> = {
  async 'ownership-proof'(config, args) {
    const file = option(args, '--key-file');
    const origin = originOf(config, args);
    if (!file || !origin) {
      process.stderr.write('agent-audio ownership-proof needs --key-file FILE and --origin URL (or PUBLIC_BASE_URL)\n');
      return 2;
    }
    const key = readKey(file);
    if (!key.startsWith('0x')) {
      process.stderr.write(`${key}\n`);
      return 2;
    }
    const address = privateKeyToAccount(key as Hex).address;
    const payTo = config.payments.payTo;
    if (payTo && payTo.toLowerCase() !== address.toLowerCase()) {
      process.stderr.write(`the key is ${address}'s, not X402_PAY_TO's (${payTo}): crawlers would refuse its proof\n`);
      return 1;
    }
    const proof = await signOwnershipProof(key as Hex, origin);
    print({ origin, address, proof, setting: `X402_OWNERSHIP_PROOFS=${proof}` });
    return 0;
  },
};
