import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A JSON-RPC endpoint in front of a node that refuses eth_getLogs over more than `maxRange` blocks, as remote
 * providers do, and records every range asked. The node behind it can be set (or changed) after the proxy starts.
 */
export async function startRangeLimitedRpc(maxRange: number): Promise<{ url: string; ranges: Array<[bigint, bigint]>; refused: number; setUpstream(url: string): void; close(): Promise<void> }> {
  let upstream: string | undefined;
  const state = { ranges: [] as Array<[bigint, bigint]>, refused: 0 };
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString() || 'null');
    const calls = Array.isArray(body) ? body : [body];
    for (const call of calls) {
      if (call?.method !== 'eth_getLogs') continue;
      const { fromBlock, toBlock } = call.params[0];
      const range: [bigint, bigint] = [BigInt(fromBlock), BigInt(toBlock)];
      state.ranges.push(range);
      if (range[1] - range[0] + 1n > BigInt(maxRange)) {
        state.refused++;
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: call.id, error: { code: -32005, message: `block range is too wide (maximum ${maxRange})` } }));
        return;
      }
    }
    if (!upstream) {
      res.writeHead(503).end();
      return;
    }
    const answer = await fetch(upstream, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }).catch(() => undefined);
    if (!answer) {
      res.writeHead(502).end();
      return;
    }
    res.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get ranges() { return state.ranges; },
    get refused() { return state.refused; },
    setUpstream(url: string) { upstream = url; },
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

/**
 * A JSON-RPC endpoint that forwards everything to `upstream` and counts the calls it forwards, by method (a batch
 * counts each of its calls): to see how many RPC calls a request makes a service spend.
 */
export async function startCountingRpc(upstream: string): Promise<{ url: string; calls: Map<string, number>; requests: Array<{ method: string; params: any[] }>; total(): number; close(): Promise<void> }> {
  const calls = new Map<string, number>();
  const requests: Array<{ method: string; params: any[] }> = [];
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString();
    const body = JSON.parse(text || 'null');
    for (const call of Array.isArray(body) ? body : [body]) {
      calls.set(String(call?.method), (calls.get(String(call?.method)) ?? 0) + 1);
      if (requests.length < 10_000) requests.push({ method: String(call?.method), params: call?.params ?? [] });
    }
    const answer = await fetch(upstream, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text }).catch(() => undefined);
    if (!answer) {
      res.writeHead(502).end();
      return;
    }
    res.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    requests,
    total: () => [...calls.values()].reduce((a, b) => a + b, 0),
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}
