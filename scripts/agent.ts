// An autonomous agent that starts with only the service's base URL and a funded wallet: it discovers the service,
// gets an API key by signing in with its wallet, buys a stream over MCP, follows the stream's events by webhook and
// over Server-Sent Events, and reads its usage by signing in again. It uses only public packages (the official x402
// client, its sign-in-with-x extension, the MCP SDK) and node:crypto: nothing from this repository's server code.
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { x402Client, x402HTTPClient } from '@x402/core/client';
import type { PaymentRequired } from '@x402/core/types';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { createSIWxClientHook } from '@x402/extensions/sign-in-with-x';
import { wrapFetchWithPayment } from '@x402/fetch';
import { privateKeyToAccount } from 'viem/accounts';

export interface AgentOptions {
  /** The API's base URL, e.g. http://127.0.0.1:8080/api/v1. */
  baseUrl: string;
  /** The wallet's private key (the only secret the agent starts with). */
  privateKey: `0x${string}`;
  /** Events to wait for, by webhook and over SSE, before reading the usage. */
  awaitEvents: string[];
  timeoutMs: number;
  /** One line per step. */
  report: (step: string, fields: Record<string, unknown>) => void;
  /** How long a stream to buy (hours, default 1). */
  durationHours?: number;
  /** Right after buying, extend the stream by this many hours (paid over MCP, extend_service). */
  extendHours?: number;
  /** At the end, stop the stream as the paying wallet and wait for the refund of its unused share on chain. */
  stopAtEnd?: boolean;
}

export interface AgentOutcome {
  discovered: { resources: number; orderResource: string };
  apiKeyPrefix: string;
  orderId: string;
  serviceId: string;
  amountAtomic: string;
  transaction: string;
  webhookEvents: string[];
  sseEvents: string[];
  usage: Record<string, unknown>;
  /** The paid extension (extendHours): its order, price, transaction and the expiry before and after. */
  extension?: AgentExtension;
  /** The refund of the stop (stopAtEnd). */
  refund?: Record<string, unknown>;
}

interface Delivery {
  id: string;
  type: string;
  verified: boolean;
}

/** A paid extension: its order, price and transaction, and the service's expiry before and after it. */
export interface AgentExtension {
  orderId: string;
  amountAtomic: string;
  transaction: string;
  expiresBefore: string;
  expiresAfter: string;
}

export async function runAgent(options: AgentOptions): Promise<AgentOutcome> {
  const { baseUrl, report } = options;
  const account = privateKeyToAccount(options.privateKey);
  const deadline = Date.now() + options.timeoutMs;
  const json = async (response: Response) => ({ status: response.status, body: (await response.json()) as any });

  // 1. Discovery: the well-known x402 document at the site's root names the paid resources.
  const wellKnown = await json(await fetch(new URL('/.well-known/x402', baseUrl)));
  if (wellKnown.status !== 200) throw new Error(`/.well-known/x402 answered ${wellKnown.status}`);
  const resources: string[] = (wellKnown.body.items ?? []).map(
    (item: { resource: { url: string } }) => item.resource.url,
  );
  const orderResource = resources.find((url) => url.endsWith('/orders'));
  if (!orderResource) throw new Error(`no /orders resource in /.well-known/x402: ${JSON.stringify(wellKnown.body)}`);
  const products = await json(await fetch(`${baseUrl}/products`));
  const stream = products.body.products.find((p: { id: string }) => p.id === 'instant-stream');
  if (!stream) throw new Error('the service sells no instant-stream');
  report('discovered', { resources: resources.length, order: orderResource, product: stream.id });

  // 2. An API key, by signing in with the wallet (the official client's sign-in-with-x hook answers the challenge).
  const signingIn = wrapFetchWithPayment(
    fetch,
    new x402HTTPClient(new x402Client()).onPaymentRequired(createSIWxClientHook(account)),
  );
  const keyAnswer = await json(
    await signingIn(`${baseUrl}/keys`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'autonomous agent' }),
    }),
  );
  if (keyAnswer.status !== 201)
    throw new Error(`POST /keys answered ${keyAnswer.status}: ${JSON.stringify(keyAnswer.body)}`);
  const apiKey: string = keyAnswer.body.api_key;
  const bearer = { authorization: `Bearer ${apiKey}` };
  report('signed in', { wallet: account.address, api_key: `${apiKey.slice(0, 12)}…` });

  // 3. A webhook receiver on this machine, registered for every event of the key.
  const deliveries: Delivery[] = [];
  let secret = '';
  const receiver = await listen((body, headers) => {
    const event = JSON.parse(body) as { id: string; type: string };
    deliveries.push({
      id: event.id,
      type: event.type,
      verified: signedBy(secret, body, headers['x-agent-audio-signature']),
    });
  });
  try {
    const hook = await json(
      await fetch(`${baseUrl}/webhooks`, {
        method: 'POST',
        headers: { ...bearer, 'content-type': 'application/json' },
        body: JSON.stringify({ url: receiver.url }),
      }),
    );
    if (hook.status !== 201) throw new Error(`POST /webhooks answered ${hook.status}: ${JSON.stringify(hook.body)}`);
    secret = hook.body.secret;
    report('webhook registered', { url: receiver.url });

    // 4. Buy over MCP: the unpaid call answers the x402 PaymentRequired, the paid retry carries the payment in _meta.
    const mcp = new Client({ name: 'autonomous-agent', version: '1.0.0' });
    await mcp.connect(
      new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { requestInit: { headers: bearer } }),
    );
    let bought: { orderId: string; serviceId: string; amountAtomic: string; transaction: string };
    let extension: AgentOutcome['extension'];
    try {
      const { tools } = await mcp.listTools();
      const args = {
        idempotency_key: randomUUID(),
        product_id: stream.id,
        email: 'agent@example.com',
        station_name: 'Autonomous FM',
        parameters: { duration_hours: options.durationHours ?? 1, max_listeners: 5, bitrate_kbps: 64 },
      };
      const paid = await callPaidTool(mcp, account, 'order', args);
      const expiresBefore: string = paid.result.service.expires_at;
      bought = {
        orderId: paid.result.order.id,
        serviceId: paid.result.service.service_id,
        amountAtomic: paid.price,
        transaction: paid.transaction,
      };
      report('bought over MCP', {
        tools: tools.length,
        order: bought.orderId,
        service: bought.serviceId,
        amount_atomic: paid.price,
        transaction: bought.transaction,
        expires_at: expiresBefore,
      });

      // 4b. The event runs late: more hours, paid the same way; the new expiry is the old one plus those hours.
      if (options.extendHours) {
        const more = await callPaidTool(mcp, account, 'extend_service', {
          idempotency_key: randomUUID(),
          service_id: bought.serviceId,
          duration_hours: options.extendHours,
        });
        extension = {
          orderId: more.result.order.id,
          amountAtomic: more.price,
          transaction: more.transaction,
          expiresBefore,
          expiresAfter: more.result.service.expires_at,
        };
        report('extended over MCP', {
          added_hours: options.extendHours,
          order: extension.orderId,
          amount_atomic: more.price,
          transaction: more.transaction,
          expires_at: `${expiresBefore} -> ${extension.expiresAfter}`,
        });
      }
    } finally {
      await mcp.close();
    }

    // 5. The same events over SSE, until the awaited ones have come both ways.
    const sseEvents = await readEvents(
      `${baseUrl}/services/${bought.serviceId}/events`,
      bearer,
      options.awaitEvents,
      deadline,
    );
    report('events over SSE', { events: sseEvents });
    await until(
      () => options.awaitEvents.every((type) => deliveries.some((d) => d.type === type)),
      deadline,
      'webhook deliveries',
    );
    const unverified = deliveries.filter((d) => !d.verified);
    if (unverified.length) throw new Error(`deliveries with a bad signature: ${JSON.stringify(unverified)}`);
    const webhookEvents = [...new Set(deliveries.map((d) => d.type))];
    report('events by webhook', { events: webhookEvents, deliveries: deliveries.length, all_signatures_valid: true });

    // 6. Usage, read as the wallet that paid: no key, a fresh sign-in.
    const usage = await json(await signingIn(`${baseUrl}/services/${bought.serviceId}/usage`));
    if (usage.status !== 200)
      throw new Error(`usage by sign-in answered ${usage.status}: ${JSON.stringify(usage.body)}`);
    report('usage by wallet sign-in', { usage: usage.body.usage });

    // 7. Done with the stream early: stop it as the wallet that paid, and wait for the unused share to come back.
    let refund: Record<string, unknown> | undefined;
    if (options.stopAtEnd) {
      const stopped = await json(await signingIn(`${baseUrl}/services/${bought.serviceId}/stop`, { method: 'POST' }));
      if (stopped.status !== 200) throw new Error(`stop answered ${stopped.status}: ${JSON.stringify(stopped.body)}`);
      refund = stopped.body.refund;
      report('stopped', {
        ended: stopped.body.ended,
        refund_amount: stopped.body.refund.amount,
        refund_status: stopped.body.refund.status,
      });
      while (refund && refund.status === 'pending' && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 500));
        refund =
          (await json(await signingIn(`${baseUrl}/services/${bought.serviceId}/usage`))).body.usage?.refund ?? refund;
      }
      report('refund', {
        status: refund?.status,
        amount: refund?.amount,
        transaction: refund?.transaction,
        to: refund?.to,
        receipt: refund?.receipt ? 'signed (JWS)' : null,
      });
    }

    return {
      discovered: { resources: resources.length, orderResource },
      apiKeyPrefix: apiKey.slice(0, 4),
      ...bought,
      webhookEvents,
      sseEvents,
      usage: usage.body.usage,
      ...(extension && { extension }),
      ...(refund && { refund }),
    };
  } finally {
    receiver.server.close();
    receiver.server.closeAllConnections();
  }
}

type Account = ReturnType<typeof privateKeyToAccount>;

/**
 * A paid MCP tool call: the unpaid call answers the x402 PaymentRequired, the paid retry carries the payment in _meta.
 * The official client pays at most $1 unless told otherwise: this agent accepts the quoted price, no more.
 */
async function callPaidTool(mcp: Client, account: Account, name: string, args: Record<string, unknown>) {
  const unpaid = (await mcp.callTool({ name, arguments: args })) as any;
  const required = unpaid.structuredContent as PaymentRequired;
  if (!unpaid.isError || required?.x402Version !== 2) {
    throw new Error(`${name}: expected a PaymentRequired: ${JSON.stringify(unpaid)}`);
  }
  const price = required.accepts[0].amount;
  const wallet = registerExactEvmScheme(new x402Client(), { signer: account });
  wallet.setSpendControls({ maxAmountPerPayment: `$${usdc(price)}` });
  const payment = await wallet.createPaymentPayload(required);
  const paid = (await mcp.callTool({ name, arguments: args, _meta: { 'x402/payment': payment } })) as any;
  if (paid.isError) {
    throw new Error(`the paid ${name} failed: ${paid.content?.map((c: { text: string }) => c.text).join(' ')}`);
  }
  const transaction: string = paid._meta['x402/payment-response'].transaction;
  return { result: paid.structuredContent, price, transaction };
}

/** USDC has 6 decimals: "1250000" → "1.250000". */
function usdc(atomic: string): string {
  const digits = atomic.padStart(7, '0');
  return `${digits.slice(0, -6)}.${digits.slice(-6)}`;
}

/** Stripe-style: "t=<unix>,v1=<hex HMAC-SHA256 of t.body>", any v1 may match (two during a secret's rotation), 5 min tolerance. */
function signedBy(secret: string, body: string, header: string | string[] | undefined): boolean {
  if (typeof header !== 'string') return false;
  const parts = header.split(',').map((p) => p.split('=') as [string, string]);
  const t = parts.find(([k]) => k === 't')?.[1];
  if (!t || Math.abs(Date.now() / 1000 - Number(t)) > 300) return false;
  const expected = createHmac('sha256', secret).update(`${t}.${body}`).digest();
  return parts.some(
    ([k, v]) => k === 'v1' && v.length === expected.length * 2 && timingSafeEqual(Buffer.from(v, 'hex'), expected),
  );
}

async function listen(
  onEvent: (body: string, headers: Record<string, string | string[] | undefined>) => void,
): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      try {
        onEvent(body, req.headers);
        res.writeHead(204).end();
      } catch {
        res.writeHead(400).end();
      }
    });
  }).listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/agent-events` };
}

/** Reads a text/event-stream until every awaited event type has come; the types seen, in order. */
async function readEvents(
  url: string,
  headers: Record<string, string>,
  awaited: string[],
  deadline: number,
): Promise<string[]> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), Math.max(0, deadline - Date.now()));
  const seen: string[] = [];
  try {
    const response = await fetch(url, { headers: { ...headers, accept: 'text/event-stream' }, signal: abort.signal });
    if (response.status !== 200 || !response.body) throw new Error(`${url} answered ${response.status}`);
    const decoder = new TextDecoder();
    let buffered = '';
    const reader = response.body.getReader();
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      buffered += decoder.decode(chunk.value, { stream: true });
      let end: number;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const type = /^event: (.+)$/m.exec(buffered.slice(0, end))?.[1];
        buffered = buffered.slice(end + 2);
        if (type) seen.push(type);
      }
      if (awaited.every((type) => seen.includes(type))) return seen;
    }
    throw new Error(`the event stream ended after ${seen.join(', ')}`);
  } catch (e) {
    if (abort.signal.aborted)
      throw new Error(
        `waited in vain for ${awaited.filter((t) => !seen.includes(t)).join(', ')} over SSE (saw ${seen.join(', ') || 'nothing'})`,
      );
    throw e;
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
}

async function until(done: () => boolean, deadline: number, what: string): Promise<void> {
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`waited in vain for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
