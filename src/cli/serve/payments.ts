import { loadSigningKey, type HeadSigner } from '../../audit/index.js';
import type { Logger } from '../../log/index.js';
import { signingKeyOptions, type Config } from '../config.js';
import { payments } from '../payments.js';
import type { Shutdown } from '../shutdown.js';

/** The operator key signs the audit chain's heads and the offers and receipts agents keep. */
export async function operatorSigner(config: Config, log: Logger): Promise<HeadSigner | undefined> {
  const signer = await loadSigningKey(signingKeyOptions(config, true));
  if (!signer) {
    log.warn(
      {},
      'audit chain heads, offers and receipts are not signed: ' +
        'set AUDIT_SIGNING_KEY or AUDIT_SIGNING_KEY_FILE (an Ed25519 private key)',
    );
  }
  return signer;
}

export async function startPayments(config: Config, log: Logger, signer: HeadSigner | undefined, shutdown: Shutdown) {
  const pay = await payments({
    production: config.production,
    dataDir: config.dataDir,
    log,
    settings: config.payments,
    operatorKey: signer,
    refundKey: config.refunds.privateKey,
    devRefundFunds: config.refunds.devFundsAtomic,
  });
  shutdown.push(() => pay.stop());
  const refundFrom = pay.refunds.wallet?.address.toLowerCase();
  if (refundFrom && pay.gateway && refundFrom === pay.gateway.terms.payTo.toLowerCase()) {
    throw new Error(
      'X402_REFUND_KEY is the key of X402_PAY_TO: ' +
        'refunds must come from a separate hot wallet holding only what refunds need',
    );
  }
  return pay;
}
