import type Router from '@koa/router';
import type { HeadPublisher } from '../audit/index.js';
import { ApiError } from '../errors/index.js';

export interface AuditRouteDeps {
  auditHead?: HeadPublisher;
}

/**
 * Public: the latest chain head signed with the operator key, for auditors to keep, in its checkpoint form (no seq):
 * the record count would tell anyone the service's sales volume.
 */
export function auditRoutes(router: Router, deps: AuditRouteDeps): void {
  router.get('/audit/head', async (ctx) => {
    if (!deps.auditHead) {
      throw new ApiError(
        503,
        'audit_signing_not_configured',
        'This deployment has no operator signing key, so it publishes no signed audit head. Ask the operator ' +
          'to set AUDIT_SIGNING_KEY or AUDIT_SIGNING_KEY_FILE.',
      );
    }
    const signed = await deps.auditHead.latestCheckpoint();
    ctx.set('Cache-Control', 'no-store');
    ctx.body = {
      ok: true,
      signed_head: signed,
      key_id: deps.auditHead.signer.keyId,
      public_key: deps.auditHead.signer.publicKeyPem,
      note:
        'Keep this document. `agent-audio audit verify --head FILE` (or an exported bundle) later proves the ' +
        'log up to this link (chain_hash) was not rewritten.',
    };
  });
}
