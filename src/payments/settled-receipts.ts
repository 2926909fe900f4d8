import type { TransactionReceipt } from 'viem';

/**
 * Receipts of the settlements an in-process facilitator just waited for, handed to the ledger so that the proof of a
 * payment is read from the receipt the node already returned instead of asking the node for it again. Each is taken
 * once; the oldest are dropped past a bound (a receipt nobody takes is simply fetched again).
 */
export class SettledReceipts {
  private readonly receipts = new Map<string, TransactionReceipt>();

  constructor(private readonly max = 1000) {}

  remember(receipt: TransactionReceipt): void {
    if (this.receipts.size >= this.max) this.receipts.delete(this.receipts.keys().next().value!);
    this.receipts.set(receipt.transactionHash.toLowerCase(), receipt);
  }

  take(transaction: string): TransactionReceipt | undefined {
    const key = transaction.toLowerCase();
    const receipt = this.receipts.get(key);
    this.receipts.delete(key);
    return receipt;
  }
}
