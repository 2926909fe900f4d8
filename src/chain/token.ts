import {
  encodeAbiParameters,
  getAddress,
  keccak256,
  numberToHex,
  parseAbi,
  zeroAddress,
  type AbiParameter,
  type Address,
  type Hex,
} from 'viem';
import { USDC_NETWORKS } from './networks.js';
import type { ChainState, StateDelta } from './state.js';

/** Base mainnet USDC's address, reused so x402 clients that know USDC on eip155:8453 accept it. */
export const USDC_ADDRESS: Address = USDC_NETWORKS.base.usdc;
export const MULTICALL3_ADDRESS: Address = '0xcA11bde05977b3631167028862bE2a173976CA11';
export const USDC_NAME = USDC_NETWORKS.base.domain.name;
export const USDC_VERSION = USDC_NETWORKS.base.domain.version;
export const USDC_DECIMALS = 6;

const ledgerEventSignatures = [
  'event Transfer(address indexed from, address indexed to, uint256 value)',
  'event Approval(address indexed owner, address indexed spender, uint256 value)',
  'event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)',
  'event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce)',
] as const;

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
  ...ledgerEventSignatures,
]);

/** The events of the token that change the ledger (Mint is not among them: its Transfer says the same). */
export const ledgerEvents = parseAbi(ledgerEventSignatures);

// Storage slots of FiatTokenV2.sol's state variables, in declaration order.
const BALANCES_SLOT = 0n;
const ALLOWANCES_SLOT = 1n;
const TOTAL_SUPPLY_SLOT = 2n;
const AUTHORIZATIONS_SLOT = 3n;
const NAME_SLOT = 4n;
/** What name() answers when the genesis stores none. */
const DEFAULT_NAME = 'USD Coin';

const word = (value: bigint | string): Hex => numberToHex(BigInt(value), { size: 32 });

function mappingSlot(key: Hex, keyType: 'address' | 'bytes32', slot: bigint | Hex): Hex {
  const layout: readonly AbiParameter[] = [{ type: keyType }, { type: 'uint256' }];
  const values: readonly unknown[] = [key, BigInt(slot)];
  return keccak256(encodeAbiParameters(layout, values));
}

/**
 * The token's name in storage when it is not the default: Solidity keeps a string under 32 bytes in its slot, the
 * bytes left-aligned and twice the length in the lowest byte.
 */
export function nameStorage(name: string): Record<Hex, Hex> {
  if (name === DEFAULT_NAME) return {};
  const bytes = Buffer.from(name, 'utf8');
  if (bytes.length > 31) throw new Error(`a token name of ${bytes.length} bytes does not fit in one slot`);
  const slot = Buffer.alloc(32);
  bytes.copy(slot);
  slot[31] = bytes.length * 2;
  return { [word(NAME_SLOT)]: `0x${slot.toString('hex')}` };
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

/** A decoded event of the token, as eth_getLogs with `ledgerEvents` returns it. */
export type LedgerEvent =
  | { eventName: 'Transfer'; args: { from: Address; to: Address; value: bigint } }
  | { eventName: 'Approval'; args: { owner: Address; spender: Address; value: bigint } }
  | { eventName: 'AuthorizationUsed' | 'AuthorizationCanceled'; args: { authorizer: Address; nonce: Hex } };

/**
 * The ledger change made by the token's events of some new blocks (in chain order), as absolute values
 * to merge into `known`, the ledger before those blocks. FiatTokenV2 emits an event for every change
 * to its state: Transfer (from the zero address for a mint), Approval (also for what transferFrom
 * leaves), AuthorizationUsed and AuthorizationCanceled, so no storage needs to be read. Storage written
 * behind the token's back (anvil_setStorageAt) is not seen.
 */
export function ledgerDelta(events: readonly LedgerEvent[], known: ChainState): StateDelta {
  const balances: Record<string, bigint> = {};
  const balanceOf = (holder: Address): bigint => (balances[holder] ??= BigInt(known.balances[holder] ?? 0));
  let totalSupply = BigInt(known.totalSupply);
  const allowances: Record<string, Record<string, string>> = {};
  const authorizations: Record<string, string[]> = {};
  for (const event of events) {
    if (event.eventName === 'Transfer') {
      const { value } = event.args;
      const [from, to] = [getAddress(event.args.from), getAddress(event.args.to)];
      if (from === zeroAddress) totalSupply += value;
      else balances[from] = balanceOf(from) - value;
      if (to === zeroAddress) totalSupply -= value;
      else balances[to] = balanceOf(to) + value;
    } else if (event.eventName === 'Approval') {
      (allowances[getAddress(event.args.owner)] ??= {})[getAddress(event.args.spender)] = event.args.value.toString();
    } else {
      (authorizations[getAddress(event.args.authorizer)] ??= []).push(event.args.nonce);
    }
  }
  const delta: StateDelta = { balances: {}, allowances, authorizations };
  for (const [holder, balance] of Object.entries(balances)) {
    if (balance < 0n)
      throw new Error(`the token's events take ${holder} below zero: the chain and the saved ledger disagree`);
    delta.balances![holder] = balance.toString();
  }
  if (totalSupply.toString() !== known.totalSupply) delta.totalSupply = totalSupply.toString();
  return delta;
}
