import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { copyCatalog, startService } from './service.js';

/** A copy of the catalog in which streaming-boost-relay (not orderable in the shipped one) is priced and orderable by agents. */
export async function relayCatalog(): Promise<Awaited<ReturnType<typeof copyCatalog>>> {
  const catalog = await copyCatalog();
  const file = join(catalog.catalogDir, 'products/streaming-boost-relay.yaml');
  const text = await readFile(file, 'utf8');
  await writeFile(
    file,
    text
      .replace('status: pending\npricing_status: pending', 'status: ready\npricing_status: approved')
      .replace('orderable: { human: false, agent: false }', 'orderable: { human: false, agent: true }')
      .replace(
        /pricing:\n  basis: quote\n  model: granular\n  currency: USDC\n  decimals: 6\n  pricing_status: pending/,
        'pricing:\n  basis: quote\n  model: formula\n  currency: USDC\n  decimals: 6\n  base_atomic: "250000"\n  per_hour_atomic: "20000"\n  per_gb_atomic: "15000"\n  pricing_status: approved\n  quote_ttl_seconds: 300',
      )
      .replace(
        'listeners: { type: integer, required: true }',
        'listeners: { type: integer, required: true, minimum: 1, maximum: 50 }',
      )
      .replace('machine: []\n  machine_payment_available: false', 'machine: [x402]\n  machine_payment_available: true'),
  );
  return catalog;
}

/**
 * A service on the relay catalog whose relays may fetch from 127.0.0.2, standing in for a public upstream on a machine
 * without public network (test-only setting), its life-cycle worker looking every 250 ms; `env` on top.
 */
export async function startRelayService(env: Record<string, string> = {}) {
  const catalog = await relayCatalog();
  const service = await startService({
    CATALOG_DIR: catalog.catalogDir,
    RULES_DIR: catalog.rulesDir,
    SSRF_TEST_PUBLIC_ADDRESSES: '127.0.0.2',
    LIFECYCLE_INTERVAL_MS: '250',
    ...env,
  });
  return { catalog, service };
}
