import { HeadPublisher, type HeadSigner } from '../../audit/index.js';
import type { Foundation } from './foundation.js';

/** Audit chain heads, signed at start and now and then when nobody asks, so that a rewrite shows in audit verify. */
export async function startAuditHead({ config, log, db, shutdown }: Foundation, signer: HeadSigner | undefined) {
  if (!signer) return undefined;
  const auditHead = new HeadPublisher(db, signer);
  const sign = () => auditHead.latest().catch((err) => log.warn({ err }, 'could not sign the audit head'));
  await sign();
  const timer = setInterval(sign, config.audit.headIntervalMs);
  timer.unref();
  shutdown.push(async () => clearInterval(timer));
  return auditHead;
}
