import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { buy } from '../test/support/purchase.js';
import type { Service } from '../test/support/service.js';
import { TestWallet } from '../test/support/wallet.js';
import { pool } from './pool.js';

export interface BoughtStream {
  broadcast_url: string;
  stream_url: string;
}

/** `count` instant-streams of `places` listener places each, bought four at a time by the dev buyer. */
export async function buyStreams(
  service: Service,
  shape: { count: number; places: number; kbps: number },
): Promise<BoughtStream[]> {
  const dev = JSON.parse(await readFile(join(service.dataDir, 'dev.json'), 'utf8'));
  const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  return pool(
    Array.from({ length: shape.count }, (_, i) => i),
    4,
    async () => {
      const r = await buy(service, wallet, {
        product_id: 'instant-stream',
        email: 'bench@example.com',
        station_name: 'Bench',
        parameters: { duration_hours: 1, max_listeners: shape.places, bitrate_kbps: shape.kbps },
      });
      if (r.status !== 200) throw new Error(`buying answered ${r.status}: ${JSON.stringify(r.body)}`);
      return r.body.service as BoughtStream;
    },
  );
}
