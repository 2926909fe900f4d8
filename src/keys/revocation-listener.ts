import type { Client, Database } from '../store/index.js';

export const REVOCATION_CHANNEL = 'api_key_revoked';
const RECONNECT_MS = 1000;

/**
 * Holds a LISTEN on the channel a trigger notifies when an API key is revoked (migration 017), on a connection of its
 * own. `listening` is true only while that connection is up: notifications sent while it is down are lost, so
 * onLost tells the owner to forget what it cached, and the listener reconnects.
 */
export class RevocationListener {
  listening = false;
  private client?: Client;
  private stopped = false;
  private retry?: NodeJS.Timeout;

  constructor(
    private readonly db: Database,
    private readonly onRevoked: (keyId: string) => void,
    private readonly onLost: () => void,
  ) {}

  async start(): Promise<void> {
    if (this.stopped) return;
    let client: Client | undefined;
    try {
      client = await this.db.dedicated();
      const lost = (err?: Error) => this.lose(client!, err);
      client.on('error', lost);
      client.on('end', lost);
      client.on('notification', (n) => {
        if (n.channel === REVOCATION_CHANNEL && n.payload) this.onRevoked(n.payload);
      });
      await client.query(`LISTEN ${REVOCATION_CHANNEL}`);
      this.client = client;
      this.listening = true;
    } catch (err) {
      if (client) this.lose(client, err as Error);
      else this.scheduleRetry();
    }
  }

  private lose(client: Client, err?: Error): void {
    if (this.client === client) this.client = undefined;
    this.listening = false;
    this.onLost();
    client.removeAllListeners('notification');
    client.removeAllListeners('end');
    client.removeAllListeners('error');
    client.on('error', () => {
      /* already given up */
    });
    try {
      client.release(err ?? new Error('revocation listener lost'));
    } catch {
      /* released already */
    }
    this.scheduleRetry();
  }

  private scheduleRetry(): void {
    if (this.stopped || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.start();
    }, RECONNECT_MS);
    this.retry.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    this.listening = false;
    if (!client) return;
    client.removeAllListeners('end');
    client.removeAllListeners('error');
    client.on('error', () => {
      /* closing */
    });
    await client.query(`UNLISTEN ${REVOCATION_CHANNEL}`).catch(() => undefined);
    client.release(true);
  }
}
