import { Agent, request, type IncomingMessage } from 'node:http';

export interface RpcCall {
  method: string;
  params: unknown[];
}

const TIMEOUT_MS = 30_000;
/** Connections to the local node kept open between calls (a checkpoint runs after each settlement). */
const agent = new Agent({ keepAlive: true, maxSockets: 4 });

/**
 * JSON-RPC calls sent in one HTTP request, answered in order. (viem's batching waits for a 0 ms timer
 * before sending, about 1 ms in Node, which is most of what a checkpoint's reads cost.) For the embedded node, over
 * node:http: fetch's Request, Response, web streams and abort signals cost about twice its CPU per call.
 */
export async function rpcBatch(url: string, calls: readonly RpcCall[]): Promise<unknown[]> {
  const body = JSON.stringify(
    calls.map((call, id) => ({ jsonrpc: '2.0', id, method: call.method, params: call.params })),
  );
  const { status, text } = await post(url, body).catch((error: NodeJS.ErrnoException & { reused?: boolean }) => {
    // A kept connection the node closed as this request went out: the calls are reads, so asking again is safe.
    if (error.reused && (error.code === 'ECONNRESET' || error.code === 'EPIPE')) return post(url, body);
    throw error;
  });
  if (status !== 200) throw new Error(`JSON-RPC ${calls[0]?.method ?? ''}…: HTTP ${status}`);
  const answers = JSON.parse(text) as Array<{ id: number; result?: unknown; error?: { message: string } }>;
  if (!Array.isArray(answers)) throw new Error(`JSON-RPC batch answered ${text.slice(0, 200)}`);
  const results = new Array<unknown>(calls.length);
  const seen = new Set<number>();
  for (const answer of answers) {
    if (answer.error) throw new Error(`JSON-RPC ${calls[answer.id]?.method}: ${answer.error.message}`);
    results[answer.id] = answer.result;
    seen.add(answer.id);
  }
  if (seen.size !== calls.length) throw new Error(`JSON-RPC batch answered ${seen.size} of ${calls.length} calls`);
  return results;
}

/** POSTs JSON; resolves with the status and body text. An error on a reused connection carries `reused`. */
function post(url: string, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', fail);
      },
    );
    const timer = setTimeout(
      () => req.destroy(new Error(`JSON-RPC batch: no answer in ${TIMEOUT_MS / 1000} s`)),
      TIMEOUT_MS,
    );
    function fail(error: Error): void {
      clearTimeout(timer);
      reject(Object.assign(error, { reused: req.reusedSocket }));
    }
    req.on('error', fail);
    req.end(body);
  });
}
