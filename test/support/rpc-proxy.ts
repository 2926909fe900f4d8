import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

interface RpcCall {
  id?: unknown;
  method?: string;
  params?: any[];
}
/** Looks at a request's calls before they are forwarded; an error answers the request instead. */
type Inspect = (calls: RpcCall[]) => { id: unknown; error: { code: number; message: string } } | undefined;

/** A JSON-RPC endpoint on loopback that shows each request to `inspect`, then forwards it to the node `upstream()`. */
async function startRpcProxy(
  upstream: () => string | undefined,
  inspect: Inspect,
): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString();
    const body = JSON.parse(text || 'null');
    const refusal = inspect(Array.isArray(body) ? body : [body]);
    if (refusal) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', ...refusal }));
      return;
    }
    const target = upstream();
    if (!target) {
      res.writeHead(503).end();
      return;
    }
    const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body: text };
    const answer = await fetch(target, init).catch(() => undefined);
    if (!answer) {
      res.writeHead(502).end();
      return;
    }
    res.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * A JSON-RPC endpoint in front of a node that refuses eth_getLogs over more than `maxRange` blocks, as remote
 * providers do, and records every range asked. The node behind it can be set (or changed) after the proxy starts.
 */
export async function startRangeLimitedRpc(maxRange: number): Promise<{
  url: string;
  ranges: Array<[bigint, bigint]>;
  refused: number;
  setUpstream(url: string): void;
  close(): Promise<void>;
}> {
  let upstream: string | undefined;
  const state = { ranges: [] as Array<[bigint, bigint]>, refused: 0 };
  const proxy = await startRpcProxy(
    () => upstream,
    (calls) => {
      for (const call of calls) {
        if (call?.method !== 'eth_getLogs') continue;
        const { fromBlock, toBlock } = call.params![0];
        const range: [bigint, bigint] = [BigInt(fromBlock), BigInt(toBlock)];
        state.ranges.push(range);
        if (range[1] - range[0] + 1n > BigInt(maxRange)) {
          state.refused++;
          return { id: call.id, error: { code: -32005, message: `block range is too wide (maximum ${maxRange})` } };
        }
      }
      return undefined;
    },
  );
  return {
    ...proxy,
    get ranges() {
      return state.ranges;
    },
    get refused() {
      return state.refused;
    },
    setUpstream(url: string) {
      upstream = url;
    },
  };
}

/**
 * A JSON-RPC endpoint that forwards everything to `upstream` and counts the calls it forwards, by method (a batch
 * counts each of its calls): to see how many RPC calls a request makes a service spend.
 */
export async function startCountingRpc(upstream: string): Promise<{
  url: string;
  calls: Map<string, number>;
  requests: Array<{ method: string; params: any[] }>;
  total(): number;
  close(): Promise<void>;
}> {
  const calls = new Map<string, number>();
  const requests: Array<{ method: string; params: any[] }> = [];
  const proxy = await startRpcProxy(
    () => upstream,
    (batch) => {
      for (const call of batch) {
        calls.set(String(call?.method), (calls.get(String(call?.method)) ?? 0) + 1);
        if (requests.length < 10_000) requests.push({ method: String(call?.method), params: call?.params ?? [] });
      }
      return undefined;
    },
  );
  return { ...proxy, calls, requests, total: () => [...calls.values()].reduce((a, b) => a + b, 0) };
}
