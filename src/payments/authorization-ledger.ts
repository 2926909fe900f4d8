import { createPublicClient, http, parseAbi, parseAbiItem, type Address, type Hex } from 'viem';

const abi = parseAbi(['function authorizationState(address authorizer, bytes32 nonce) view returns (bool)']);
const authorizationUsed = parseAbiItem('event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)');

/**
 * Reads the token contract itself: whether an EIP-3009 authorization was used, and in which transaction.
 * This is how an order whose settlement outcome is unknown (crash, timeout) learns whether it was paid.
 */
export class AuthorizationLedger {
  private readonly client;

  constructor(rpcUrl: string, private readonly token: Address) {
    this.client = createPublicClient({ transport: http(rpcUrl, { timeout: 10_000, retryCount: 1 }) });
  }

  /** The chain's latest block number; throws when the RPC endpoint does not answer. */
  latestBlock(): Promise<bigint> {
    return this.client.getBlockNumber({ cacheTime: 0 });
  }

  isUsed(authorizer: string, nonce: string): Promise<boolean> {
    return this.client.readContract({ address: this.token, abi, functionName: 'authorizationState', args: [authorizer as Address, nonce as Hex] });
  }

  async transactionOf(authorizer: string, nonce: string): Promise<string | undefined> {
    const logs = await this.client.getLogs({ address: this.token, event: authorizationUsed, args: { authorizer: authorizer as Address, nonce: nonce as Hex }, fromBlock: 0n });
    return logs[0]?.transactionHash ?? undefined;
  }
}
