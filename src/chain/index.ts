export { DEV_ACCOUNTS, DEV_ROLES, type DevAccount, type DevAccounts } from './accounts.js';
export {
  EMBEDDED_ANVIL_ARGS,
  EMBEDDED_CHAIN_ID,
  localViemChain,
  startEmbeddedChain,
  type EmbeddedChain,
  type EmbeddedChainOptions,
} from './embedded-chain.js';
export type { ArchivedLog } from './state.js';
export { MULTICALL3_ADDRESS, tokenAbi, USDC_ADDRESS, USDC_DECIMALS, USDC_NAME, USDC_VERSION } from './token.js';
