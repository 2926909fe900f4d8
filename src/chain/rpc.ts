export interface RpcCall {
  method: string;
  params: unknown[];
}

/**
 * JSON-RPC calls sent in one HTTP request, answered in order. (viem's batching waits for a 0 ms timer
 * before sending, about 1 ms in Node, which is most of what a checkpoint's reads cost.)
 */
export async function rpcBatch(url: string, calls: readonly RpcCall[]): Promise<unknown[]> {
  const body = calls.map((call, id) => ({ jsonrpc: '2.0', id, method: call.method, params: call.params }));
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  if (!response.ok) throw new Error(`JSON-RPC ${calls[0]?.method ?? ''}…: HTTP ${response.status}`);
  const answers = (await response.json()) as Array<{ id: number; result?: unknown; error?: { message: string } }>;
  if (!Array.isArray(answers)) throw new Error(`JSON-RPC batch answered ${JSON.stringify(answers).slice(0, 200)}`);
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
