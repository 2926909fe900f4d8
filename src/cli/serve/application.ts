import type { HeadSigner } from '../../audit/index.js';
import type { CheckoutStatus, ConnectionCap } from '../../http/index.js';
import { events } from '../events.js';
import { startAuditHead } from './audit-head.js';
import { serveApi } from './api-role.js';
import { sellsStreams, type Foundation } from './foundation.js';
import { healthCheck } from './health.js';
import { icecastDecider, serveCallbacks } from './host-role.js';
import { refunding } from './refunding.js';
import { sales } from './sales.js';
import { streamingParts } from './streaming-parts.js';

/**
 * What this instance's role serves, handed to the listening server: for an API, everything agents reach over HTTP
 * and MCP; for a host, its Icecast's callbacks. Then webhooks start delivering.
 */
export async function startApplication(base: Foundation, signer: HeadSigner | undefined, connections: ConnectionCap) {
  const { config, log, db, shutdown } = base;
  const parts = streamingParts(base);
  await parts.api.media.removePartialUploads();
  const checkout = checkoutStatus(base);
  const sold = sales(base, parts.services);
  const refunds = refunding(base, parts);
  const auditHead = await startAuditHead(base, signer);
  const eventing = await events(db, log, config);
  shutdown.push(() => eventing.stop());
  const decider = icecastDecider(base, parts, eventing);
  const checkHealth = healthCheck(base, parts.lease);
  if (config.role === 'host') serveCallbacks(base, decider);
  else {
    serveApi(base, { parts, sold, refunds, checkout, auditHead, checkHealth, decider, eventing, connections });
    shutdown.push(() => eventing.stop()); // SSE streams end before the server waits for its connections
  }
  eventing.start();
  return {
    ...parts,
    decider,
    checkout,
    checkHealth,
    auditHead,
    recovery: sold.recovery,
    refundWorker: refunds.worker,
  };
}

/** What checkout says: unavailable, with the reason, where this instance cannot sell streams. */
function checkoutStatus(base: Foundation): CheckoutStatus {
  const { pay, stream } = base;
  if (sellsStreams(base)) return pay.checkout;
  return { ...pay.checkout, available: false, configured: false, reason: `streaming is unavailable: ${stream.reason}` };
}
