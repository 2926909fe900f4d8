import { x402Client } from '@x402/core/client';
import {
  decodePaymentRequiredHeader,
  decodePaymentResponseHeader,
  encodePaymentSignatureHeader,
} from '@x402/core/http';
import type { PaymentPayload, PaymentRequired } from '@x402/core/types';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { createPublicClient, createWalletClient, defineChain, http, parseAbi, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '../../src/payments/transfer-digest.js';

export { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader };

const erc20 = parseAbi([
  'function balanceOf(address) view returns (uint256)',
  'function cancelAuthorization(address authorizer, bytes32 nonce, bytes signature)',
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)',
]);
const transferTypes = TRANSFER_WITH_AUTHORIZATION_TYPES;

/** An agent's wallet on the local chain, paying with the official x402 client. */
export class TestWallet {
  readonly client: x402Client;
  readonly address: Address;
  private readonly chain;
  private readonly account;

  private readonly rpcUrl: string;

  constructor(privateKey: `0x${string}`, rpcUrl: string) {
    this.rpcUrl = rpcUrl;
    const account = privateKeyToAccount(privateKey);
    this.account = account;
    this.address = account.address;
    this.client = registerExactEvmScheme(new x402Client(), { signer: account });
    this.client.setSpendControls({ maxAmountPerPayment: '$20' });
    this.chain = createPublicClient({ transport: http(rpcUrl) });
  }

  /** fetch that pays 402 answers, recording every PAYMENT-SIGNATURE it sent. */
  payingFetch(sent: string[] = []): typeof fetch {
    const recording: typeof fetch = async (input, init) => {
      const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
      const signature = headers.get('payment-signature');
      if (signature) sent.push(signature);
      return fetch(input, init);
    };
    return wrapFetchWithPayment(recording, this.client);
  }

  /** A signed payment for a PAYMENT-REQUIRED header, optionally tampered with after signing. */
  async pay(requiredHeader: string, tamper?: (p: PaymentPayload) => void): Promise<string> {
    const required: PaymentRequired = decodePaymentRequiredHeader(requiredHeader);
    const payload = await this.client.createPaymentPayload(required);
    tamper?.(payload);
    return encodePaymentSignatureHeader(payload);
  }

  /** A payment whose EIP-3009 authorization is validly signed but with other validity times (e.g. already expired). */
  async payWithValidity(requiredHeader: string, validAfter: bigint, validBefore: bigint): Promise<string> {
    const required: PaymentRequired = decodePaymentRequiredHeader(requiredHeader);
    const payload = await this.client.createPaymentPayload(required);
    const authorization = (payload.payload as { authorization: Record<string, string> }).authorization;
    authorization.validAfter = validAfter.toString();
    authorization.validBefore = validBefore.toString();
    const accepted = payload.accepted;
    (payload.payload as { signature: string }).signature = await this.account.signTypedData({
      domain: { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: accepted.asset as Address },
      types: transferTypes,
      primaryType: 'TransferWithAuthorization',
      message: {
        from: authorization.from as Address,
        to: authorization.to as Address,
        value: BigInt(authorization.value),
        validAfter,
        validBefore,
        nonce: authorization.nonce as `0x${string}`,
      },
    });
    return encodePaymentSignatureHeader(payload);
  }

  /** The buyer who lies: cancels the authorization of a payment it has sent (EIP-3009 cancelAuthorization), on chain. */
  async cancel(signature: string): Promise<'mined' | 'reverted'> {
    const { asset, nonce } = authorizationOf(signature);
    const cancelSignature = await this.account.signTypedData({
      domain: { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: asset },
      types: {
        CancelAuthorization: [
          { name: 'authorizer', type: 'address' },
          { name: 'nonce', type: 'bytes32' },
        ],
      },
      primaryType: 'CancelAuthorization',
      message: { authorizer: this.address, nonce },
    });
    return this.send(asset, 'cancelAuthorization', [this.address, nonce, cancelSignature]);
  }

  /** The buyer who lies: spends the same authorization nonce on another transfer (to `to`, of `value`), on chain. */
  async spendNonceElsewhere(signature: string, to: Address, value: bigint): Promise<'mined' | 'reverted'> {
    const { asset, nonce } = authorizationOf(signature);
    const validBefore = BigInt(Math.floor(Date.now() / 1000) + 600);
    const transferSignature = await this.account.signTypedData({
      domain: { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: asset },
      types: transferTypes,
      primaryType: 'TransferWithAuthorization',
      message: { from: this.address, to, value, validAfter: 0n, validBefore, nonce },
    });
    return this.send(asset, 'transferWithAuthorization', [
      this.address,
      to,
      value,
      0n,
      validBefore,
      nonce,
      transferSignature,
    ]);
  }

  private async send(
    token: Address,
    functionName: 'cancelAuthorization' | 'transferWithAuthorization',
    args: readonly unknown[],
  ): Promise<'mined' | 'reverted'> {
    const chain = defineChain({
      id: 8453,
      name: 'local',
      nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
      rpcUrls: { default: { http: [this.rpcUrl] } },
    });
    const wallet = createWalletClient({
      account: this.account,
      chain,
      transport: http(this.rpcUrl),
      pollingInterval: 20,
    });
    // Sent without simulation, as an attacker would: a revert is an answer too.
    const hash = await wallet.writeContract({
      address: token,
      abi: erc20,
      functionName,
      args: args as never,
      gas: 200_000n,
    });
    const receipt = await this.chain.waitForTransactionReceipt({ hash, pollingInterval: 20 });
    return receipt.status === 'success' ? 'mined' : 'reverted';
  }

  balanceOf(token: string, owner: string): Promise<bigint> {
    return this.chain.readContract({
      address: token as Address,
      abi: erc20,
      functionName: 'balanceOf',
      args: [owner as Address],
    });
  }
}

/** The token and nonce a PAYMENT-SIGNATURE header authorizes. */
export function authorizationOf(signature: string): { asset: Address; nonce: Hex; from: Address } {
  const payload = JSON.parse(Buffer.from(signature, 'base64').toString('utf8')) as {
    accepted: { asset: Address };
    payload: { authorization: { nonce: Hex; from: Address } };
  };
  return {
    asset: payload.accepted.asset,
    nonce: payload.payload.authorization.nonce,
    from: payload.payload.authorization.from,
  };
}
