import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentPayload, PaymentRequired } from '@x402/core/types';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { createPublicClient, http, parseAbi, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';

export { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader };

const erc20 = parseAbi(['function balanceOf(address) view returns (uint256)']);

/** An agent's wallet on the local chain, paying with the official x402 client. */
export class TestWallet {
  readonly client: x402Client;
  readonly address: Address;
  private readonly chain;
  private readonly account;

  constructor(privateKey: `0x${string}`, rpcUrl: string) {
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
      types: {
        TransferWithAuthorization: [
          { name: 'from', type: 'address' }, { name: 'to', type: 'address' }, { name: 'value', type: 'uint256' },
          { name: 'validAfter', type: 'uint256' }, { name: 'validBefore', type: 'uint256' }, { name: 'nonce', type: 'bytes32' },
        ],
      },
      primaryType: 'TransferWithAuthorization',
      message: {
        from: authorization.from as Address, to: authorization.to as Address, value: BigInt(authorization.value),
        validAfter, validBefore, nonce: authorization.nonce as `0x${string}`,
      },
    });
    return encodePaymentSignatureHeader(payload);
  }

  balanceOf(token: string, owner: string): Promise<bigint> {
    return this.chain.readContract({ address: token as Address, abi: erc20, functionName: 'balanceOf', args: [owner as Address] });
  }
}
