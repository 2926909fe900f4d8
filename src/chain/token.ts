import {
  encodeAbiParameters,
  getAddress,
  keccak256,
  numberToHex,
  parseAbi,
  zeroAddress,
  type Address,
  type Hex,
  type PublicClient,
} from 'viem';
import type { ChainState, StateDelta } from './state.js';

/** Base mainnet USDC's address, reused so x402 clients that know USDC on eip155:8453 accept it. */
export const USDC_ADDRESS: Address = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
export const MULTICALL3_ADDRESS: Address = '0xcA11bde05977b3631167028862bE2a173976CA11';
export const USDC_NAME = 'USD Coin';
export const USDC_VERSION = '2';
export const USDC_DECIMALS = 6;

export const tokenAbi = parseAbi([
  'function name() view returns (string)',
  'function symbol() view returns (string)',
  'function version() view returns (string)',
  'function decimals() view returns (uint8)',
  'function DOMAIN_SEPARATOR() view returns (bytes32)',
  'function totalSupply() view returns (uint256)',
  'function balanceOf(address account) view returns (uint256)',
  'function allowance(address owner, address spender) view returns (uint256)',
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'function mint(address to, uint256 amount) returns (bool)',
  'function transfer(address to, uint256 value) returns (bool)',
  'function approve(address spender, uint256 value) returns (bool)',
  'function transferFrom(address from, address to, uint256 value) returns (bool)',
  'event Transfer(address indexed from, address indexed to, uint256 value)',
  'event Approval(address indexed owner, address indexed spender, uint256 value)',
  'event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)',
  'event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce)',
]);

const ledgerEvents = tokenAbi.filter((item) => item.type === 'event');

// Storage slots of FiatTokenV2.sol's state variables, in declaration order.
const BALANCES_SLOT = 0n;
const ALLOWANCES_SLOT = 1n;
const TOTAL_SUPPLY_SLOT = 2n;
const AUTHORIZATIONS_SLOT = 3n;

const word = (value: bigint | string): Hex => numberToHex(BigInt(value), { size: 32 });

function mappingSlot(key: Hex, keyType: 'address' | 'bytes32', slot: bigint | Hex): Hex {
  return keccak256(encodeAbiParameters([{ type: keyType }, { type: 'uint256' }], [key, BigInt(slot)]));
}

/** The token's storage for a ledger state, as anvil's state file wants it. */
export function tokenStorage(state: ChainState): Record<Hex, Hex> {
  const storage: Record<Hex, Hex> = {};
  if (BigInt(state.totalSupply) > 0n) storage[word(TOTAL_SUPPLY_SLOT)] = word(state.totalSupply);
  for (const [holder, balance] of Object.entries(state.balances)) {
    if (BigInt(balance) > 0n) storage[mappingSlot(holder as Hex, 'address', BALANCES_SLOT)] = word(balance);
  }
  for (const [owner, spenders] of Object.entries(state.allowances)) {
    const ownerSlot = mappingSlot(owner as Hex, 'address', ALLOWANCES_SLOT);
    for (const [spender, value] of Object.entries(spenders)) {
      if (BigInt(value) > 0n) storage[mappingSlot(spender as Hex, 'address', ownerSlot)] = word(value);
    }
  }
  for (const [authorizer, nonces] of Object.entries(state.authorizations)) {
    const authorizerSlot = mappingSlot(authorizer as Hex, 'address', AUTHORIZATIONS_SLOT);
    for (const nonce of nonces) storage[mappingSlot(nonce as Hex, 'bytes32', authorizerSlot)] = word(1n);
  }
  return storage;
}

/**
 * What changed in the ledger between two blocks, read from the token's events and then its
 * storage at toBlock. Storage written behind the token's back (anvil_setStorageAt) is not seen.
 */
export async function readLedgerDelta(
  client: PublicClient,
  fromBlock: bigint,
  toBlock: bigint,
  known: ChainState,
): Promise<StateDelta> {
  const logs = await client.getLogs({ address: USDC_ADDRESS, events: ledgerEvents, fromBlock, toBlock, strict: true });
  const holders = new Set<Address>();
  const pairs = new Map<string, [Address, Address]>();
  const authorizations: Record<string, string[]> = {};
  for (const log of logs) {
    if (log.eventName === 'Transfer') {
      holders.add(log.args.from).add(log.args.to);
    } else if (log.eventName === 'Approval') {
      pairs.set(`${log.args.owner}/${log.args.spender}`, [log.args.owner, log.args.spender]);
    } else {
      (authorizations[getAddress(log.args.authorizer)] ??= []).push(log.args.nonce);
    }
  }
  holders.delete(zeroAddress);
  if (logs.length === 0) return {};

  const at = { address: USDC_ADDRESS, abi: tokenAbi, blockNumber: toBlock } as const;
  const [totalSupply, balances, allowances] = await Promise.all([
    client.readContract({ ...at, functionName: 'totalSupply' }),
    Promise.all([...holders].map((holder) => client.readContract({ ...at, functionName: 'balanceOf', args: [holder] }))),
    Promise.all(
      [...pairs.values()].map((pair) => client.readContract({ ...at, functionName: 'allowance', args: pair })),
    ),
  ]);
  const delta: StateDelta = { balances: {}, allowances: {}, authorizations };
  if (totalSupply.toString() !== known.totalSupply) delta.totalSupply = totalSupply.toString();
  [...holders].forEach((holder, i) => (delta.balances![getAddress(holder)] = balances[i].toString()));
  [...pairs.values()].forEach(([owner, spender], i) => {
    (delta.allowances![getAddress(owner)] ??= {})[getAddress(spender)] = allowances[i].toString();
  });
  return delta;
}
