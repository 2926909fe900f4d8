import { randomBytes, type KeyObject } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../log/index.js';
import type { Facilitator } from './facilitator.js';
import { facilitatorJwtRefusal } from './facilitator-auth.js';
import type { FacilitatorFault } from './facilitator-faults.js';
import type { PaymentPayload, PaymentRequirements, SettleResponse } from './payment-gateway.js';

/** A facilitator request body is one payment payload and its requirements: a few kilobytes. */
const MAX_BODY_BYTES = 64 * 1024;

export interface FacilitatorServer {
  url: string;
  close(): Promise<void>;
}

/**
 * The x402 v2 HTTP facilitator contract (POST /verify, POST /settle, GET /supported) over a facilitator made of the
 * official packages: what production reaches at X402_FACILITATOR_URL, runnable by an operator and by the tests.
 */
export async function startFacilitatorServer(options: {
  facilitator: Facilitator;
  host: string;
  port: number;
  log: Logger;
  fault?: FacilitatorFault;
  /** Every request must carry an API-key JWT (src/payments/facilitator-auth.ts) signed by this key's private half. */
  authPublicKey?: KeyObject;
}): Promise<FacilitatorServer> {
  const { facilitator, log, fault } = options;
  const started = Date.now();
  const hung = new Set<ServerResponse>();
  let lastTransaction: string | undefined;

  const settle = async (body: Body, res: ServerResponse) => {
    if (fault?.kind === 'settle-refused') {
      return send(res, 200, refusal(body, 'unexpected_settle_error', 'the facilitator could not settle'));
    }
    if (fault?.kind === 'wrong-transaction') {
      const transaction = fault.transaction ?? lastTransaction ?? `0x${randomBytes(32).toString('hex')}`;
      return send(res, 200, { success: true, transaction, network: body.paymentRequirements.network });
    }
    const result = await facilitator.settle(body.paymentPayload, body.paymentRequirements);
    if (result.success && result.transaction) lastTransaction = result.transaction;
    log.info({ success: result.success, reason: result.errorReason, transaction: result.transaction }, 'settle');
    if (fault?.kind === 'settle-hang') {
      hung.add(res);
      return;
    }
    const pending = !result.success && result.errorReason === 'settlement_pending';
    if (pending) return sendPending(res, result, fault);
    send(res, 200, result);
  };

  const routes: Record<string, (body: Body, res: ServerResponse) => Promise<void>> = {
    'GET /supported': async (_body, res) => {
      const supported = await facilitator.getSupported();
      if (fault?.kind !== 'unsupported-network') return send(res, 200, supported);
      const elsewhere = supported.kinds.map((k) => ({ ...k, network: 'eip155:1' as const }));
      send(res, 200, { ...supported, kinds: elsewhere });
    },
    'POST /verify': async (body, res) =>
      send(res, 200, await facilitator.verify(body.paymentPayload, body.paymentRequirements)),
    'POST /settle': settle,
  };

  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const route = routes[`${req.method} ${path}`];
    if (!route) return send(res, 404, { error: 'not found: POST /verify, POST /settle, GET /supported' });
    if (options.authPublicKey) {
      const request = { method: req.method ?? '', host: req.headers.host ?? '', path };
      const refusal = facilitatorJwtRefusal(req.headers.authorization, options.authPublicKey, request);
      if (refusal) {
        log.warn({ path, reason: refusal }, 'request refused: no valid API-key JWT');
        return send(res, 401, { error: `unauthorized: ${refusal}` });
      }
    }
    if (fault?.kind === 'down' && Date.now() - started < fault.forMs) {
      return send(res, 503, { error: 'facilitator temporarily unavailable' });
    }
    readBody(req)
      .then((body) => route(body, res))
      .catch((e: Error) => {
        log.warn({ err: e, path: req.url }, 'facilitator request failed');
        if (!res.headersSent) send(res, e instanceof BadRequest ? 400 : 500, { error: e.message });
      });
  });
  server.listen(options.port, options.host);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    url: `http://${host}:${port}`,
    close: () => closeServer(server, hung),
  };
}

interface Body {
  paymentPayload: PaymentPayload;
  paymentRequirements: PaymentRequirements;
}

class BadRequest extends Error {}

async function readBody(req: IncomingMessage): Promise<Body> {
  if (req.method === 'GET') return {} as Body;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new BadRequest(`a request body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new BadRequest('the body is not JSON');
  }
  const { paymentPayload, paymentRequirements } = (body ?? {}) as Partial<Body>;
  if (typeof paymentPayload !== 'object' || typeof paymentRequirements !== 'object' || !paymentPayload) {
    throw new BadRequest('the body needs paymentPayload and paymentRequirements');
  }
  return { paymentPayload, paymentRequirements: paymentRequirements! };
}

function refusal(body: Body, errorReason: string, errorMessage: string): SettleResponse {
  return {
    success: false,
    errorReason,
    errorMessage,
    transaction: '',
    network: body.paymentRequirements.network,
  } as SettleResponse;
}

/** A settlement still in flight, in the shape of the facilitator the fault imitates. */
function sendPending(res: ServerResponse, result: SettleResponse, fault: FacilitatorFault | undefined): void {
  const paymentId = `pay_${randomBytes(12).toString('hex')}`;
  if (fault?.kind === 'pending-500') return send(res, 500, result);
  if (fault?.kind === 'pending-circle') return send(res, 200, { ...result, paymentId });
  if (fault?.kind === 'pending-202') return send(res, 202, { paymentId, status: 'pending', retryAfterMs: 1000 });
  send(res, 200, result);
}

function send(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function closeServer(server: Server, hung: Set<ServerResponse>): Promise<void> {
  for (const res of hung) res.destroy();
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
