import {
  createPublicClient,
  createWalletClient,
  defineChain,
  http,
  parseAbi,
  parseSignature,
  type Address,
  type Hex,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { createNonceManager, jsonRpc } from 'viem/nonce';
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '../payments/index.js';

const abi = parseAbi([
  'function balanceOf(address account) view returns (uint256)',
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)',
]);

/** Where refunds are paid from: an operator hot wallet (never payTo), on the chain payments are made on. */
export interface RefundWalletConfig {
  rpcUrl: string;
  chainId: number;
  token: Address;
  privateKey: Hex;
  /** The token's EIP-712 domain (USDC on Base: "USD Coin", "2"). */
  tokenName: string;
  tokenVersion: string;
}

/** What the wallet lacks to send a refund, if anything. */
export type Shortfall = { kind: 'usdc'; holds: bigint; needs: bigint } | { kind: 'gas'; holds: bigint; needs: bigint };

/** Gas a transferWithAuthorization takes, with margin (about 60 000 on USDC). */
const TRANSFER_GAS = 120_000n;

/**
 * Sends refunds as EIP-3009 transferWithAuthorization of the refund wallet, signed with a nonce the caller derives
 * from the refund: the token accepts each nonce once, so a refund sent again after a crash cannot pay twice.
 */
export class RefundWallet {
  readonly address: Address;
  private readonly wallet;
  private readonly reader;

  constructor(private readonly config: RefundWalletConfig) {
    const chain = defineChain({
      id: config.chainId,
      name: `eip155:${config.chainId}`,
      nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
      rpcUrls: { default: { http: [config.rpcUrl] } },
    });
    const account = privateKeyToAccount(config.privateKey, { nonceManager: createNonceManager({ source: jsonRpc() }) });
    this.address = account.address;
    this.wallet = createWalletClient({
      account,
      chain,
      transport: http(config.rpcUrl, { timeout: 10_000 }),
      pollingInterval: 50,
    });
    this.reader = createPublicClient({
      chain,
      transport: http(config.rpcUrl, { timeout: 10_000 }),
      pollingInterval: 50,
    });
  }

  /** Whether the wallet holds the USDC and the gas this refund needs. */
  async shortfall(amount: bigint): Promise<Shortfall | undefined> {
    const [usdc, eth, gasPrice] = await Promise.all([
      this.reader.readContract({ address: this.config.token, abi, functionName: 'balanceOf', args: [this.address] }),
      this.reader.getBalance({ address: this.address }),
      this.reader.getGasPrice(),
    ]);
    if (usdc < amount) return { kind: 'usdc', holds: usdc, needs: amount };
    const gas = gasPrice * TRANSFER_GAS;
    if (eth < gas) return { kind: 'gas', holds: eth, needs: gas };
    return undefined;
  }

  /** Signs and sends the transfer; resolves with its transaction once mined (whatever its outcome). */
  async send(
    to: Address,
    amount: bigint,
    nonce: Hex,
    broadcast?: () => void,
  ): Promise<{ transaction: Hex; success: boolean }> {
    const validBefore = BigInt(Math.floor(Date.now() / 1000) + 3600);
    const signature = await this.wallet.signTypedData({
      domain: {
        name: this.config.tokenName,
        version: this.config.tokenVersion,
        chainId: this.config.chainId,
        verifyingContract: this.config.token,
      },
      types: TRANSFER_WITH_AUTHORIZATION_TYPES,
      primaryType: 'TransferWithAuthorization',
      message: { from: this.address, to, value: amount, validAfter: 0n, validBefore, nonce },
    });
    const { v, r, s, yParity } = parseSignature(signature);
    const transaction = await this.wallet.writeContract({
      address: this.config.token,
      abi,
      functionName: 'transferWithAuthorization',
      args: [this.address, to, amount, 0n, validBefore, nonce, Number(v ?? BigInt(yParity + 27)), r, s],
    });
    broadcast?.();
    const receipt = await this.reader.waitForTransactionReceipt({ hash: transaction, timeout: 60_000 });
    return { transaction, success: receipt.status === 'success' };
  }
}
