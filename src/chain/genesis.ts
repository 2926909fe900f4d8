import { writeFile } from 'node:fs/promises';
import { numberToHex } from 'viem';
import { DEV_ETH_BALANCE } from './accounts.js';
import type { Artifacts } from './contracts.js';
import type { ChainState } from './state.js';
import type { Address } from 'viem';
import { MULTICALL3_ADDRESS, nameStorage, tokenStorage } from './token.js';

/**
 * Writes a state file for `anvil --load-state`: the contracts' code, the token's storage and the
 * dev accounts' nonces, but no blocks, so the chain restarts at block 0 (anvil slows down as blocks
 * pile up) with the ledger intact. It does the work of anvil_setCode/anvil_setStorageAt in one load.
 */
export async function writeAnvilGenesis(
  path: string,
  state: ChainState,
  artifacts: Artifacts,
  token: { address: Address; name: string },
): Promise<void> {
  const contract = (code: string, storage: Record<string, string>) => ({ nonce: 0, balance: '0x0', code, storage });
  const accounts: Record<string, unknown> = {
    [token.address]: contract(artifacts.contracts.FiatTokenV2.deployedBytecode, {
      ...tokenStorage(state),
      ...nameStorage(token.name),
    }),
    [MULTICALL3_ADDRESS]: contract(artifacts.contracts.Multicall3.deployedBytecode, {}),
  };
  for (const [address, nonce] of Object.entries(state.accountNonces)) {
    accounts[address] = { nonce, balance: numberToHex(DEV_ETH_BALANCE), code: '0x', storage: {} };
  }
  const genesis = { block: null, best_block_number: null, blocks: [], transactions: [], accounts };
  await writeFile(path, JSON.stringify(genesis));
}
