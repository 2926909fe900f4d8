import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { Abi, Hex } from 'viem';

export interface ContractArtifact {
  abi: Abi;
  deployedBytecode: Hex;
}

export interface Artifacts {
  sourceHash: string;
  solcVersion: string;
  contracts: Record<ContractName, ContractArtifact>;
}

export type ContractName = 'FiatTokenV2' | 'Multicall3';

const CONTRACT_NAMES: ContractName[] = ['FiatTokenV2', 'Multicall3'];
const CONTRACTS_DIR = fileURLToPath(new URL('./contracts/', import.meta.url));
export const ARTIFACTS_PATH = `${CONTRACTS_DIR}artifacts.json`;

const SOLC_SETTINGS = {
  optimizer: { enabled: true, runs: 200 },
  evmVersion: 'cancun',
  outputSelection: { '*': { '*': ['abi', 'evm.deployedBytecode.object'] } },
};

function readSources(): Record<string, string> {
  return Object.fromEntries(
    CONTRACT_NAMES.map((name) => [`${name}.sol`, readFileSync(`${CONTRACTS_DIR}${name}.sol`, 'utf8')]),
  );
}

function hashSources(sources: Record<string, string>): string {
  const hash = createHash('sha256');
  hash.update(JSON.stringify(SOLC_SETTINGS));
  for (const [file, content] of Object.entries(sources)) hash.update(`${file}\0${content}\0`);
  return hash.digest('hex');
}

export function currentSourceHash(): string {
  return hashSources(readSources());
}

export function compileContracts(): Artifacts {
  const solc = createRequire(import.meta.url)('solc');
  const sources = readSources();
  const input = {
    language: 'Solidity',
    sources: Object.fromEntries(Object.entries(sources).map(([file, content]) => [file, { content }])),
    settings: SOLC_SETTINGS,
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input)));
  const errors = (output.errors ?? []).filter((e: { severity: string }) => e.severity === 'error');
  if (errors.length > 0) {
    throw new Error(`solc failed:\n${errors.map((e: { formattedMessage: string }) => e.formattedMessage).join('\n')}`);
  }
  const contracts = Object.fromEntries(
    CONTRACT_NAMES.map((name) => {
      const compiled = output.contracts[`${name}.sol`][name];
      return [name, { abi: compiled.abi, deployedBytecode: `0x${compiled.evm.deployedBytecode.object}` }];
    }),
  ) as Record<ContractName, ContractArtifact>;
  return { sourceHash: hashSources(sources), solcVersion: solc.version(), contracts };
}

export function readCommittedArtifacts(): Artifacts | undefined {
  try {
    return JSON.parse(readFileSync(ARTIFACTS_PATH, 'utf8')) as Artifacts;
  } catch {
    return undefined;
  }
}

export function writeArtifacts(artifacts: Artifacts): void {
  writeFileSync(ARTIFACTS_PATH, `${JSON.stringify(artifacts, null, 2)}\n`);
}

let cached: Artifacts | undefined;

/** The committed artifacts when they match the .sol sources, else a fresh in-memory compile (~1 s). */
export function loadArtifacts(): Artifacts {
  if (cached) return cached;
  const committed = readCommittedArtifacts();
  cached = committed?.sourceHash === currentSourceHash() ? committed : compileContracts();
  return cached;
}
