import type { RefundWallet } from '../../refunds/index.js';
import { cachedProbe } from '../cached-probe.js';

/** How long GET /health answers the refund wallet's state from its last look (three RPC calls). */
const REFUND_PROBE_MS = 30_000;

/** JSON-RPC's "method not found", and what read-only gateways say instead of it. */
const READ_ONLY = /does not exist|method not found|not supported|not allowed|unsupported|disabled|read.?only/i;

/**
 * GET /health's `refunds` check in production: refunds are sent through X402_RPC_URL from the refund wallet, so the
 * endpoint must accept transactions and the wallet must hold gas and USDC. A transaction that is no transaction ("0x")
 * tells a node that decodes it (and refuses it) from a gateway that serves no eth_sendRawTransaction at all.
 */
export function refundHealth(rpcUrl: string, wallet: RefundWallet) {
  return cachedProbe(REFUND_PROBE_MS, async (): Promise<{ ok: boolean } & Record<string, unknown>> => {
    try {
      const sends = await acceptsTransactions(rpcUrl);
      if (sends !== true) return { ok: false, wallet: wallet.address, error: sends };
      const short = await wallet.shortfall(1n);
      if (!short) return { ok: true, wallet: wallet.address };
      const lacks = short.kind === 'usdc' ? 'no USDC' : `not the gas of one refund (${short.holds} wei)`;
      return { ok: false, wallet: wallet.address, error: `the refund wallet holds ${lacks}: refunds wait` };
    } catch (e) {
      return { ok: false, wallet: wallet.address, error: `X402_RPC_URL did not answer: ${firstLine(e)}` };
    }
  });
}

async function acceptsTransactions(rpcUrl: string): Promise<true | string> {
  const answer = await fetch(rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_sendRawTransaction', params: ['0x'] }),
    signal: AbortSignal.timeout(5000),
  });
  const text = await answer.text();
  let error: { code?: number; message?: string } | undefined;
  try {
    error = (JSON.parse(text) as { error?: typeof error }).error;
  } catch {
    throw new Error(`HTTP ${answer.status}: ${text.slice(0, 100)}`);
  }
  const said = error ? `${error.code ?? ''} ${error.message ?? ''}` : '';
  if (error && (error.code === -32601 || READ_ONLY.test(said))) {
    return `X402_RPC_URL takes no transactions (eth_sendRawTransaction: ${said.trim()}): refunds cannot be sent; point it at a node that accepts them`;
  }
  return true;
}

function firstLine(e: unknown): string {
  return String((e as Error)?.message ?? e).split('\n')[0];
}
