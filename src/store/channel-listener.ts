import type { Client, Database } from './database.js';

const RECONNECT_MS = 1000;

/** What a ChannelListener tells its owner. */
export interface ChannelHandlers {
  /** A notification on the channel, with its payload. */
  onNotified: (payload: string) => void;
  /** The connection is down: notifications may be lost from now on. */
  onLost: () => void;
  /** Listening again (after start or a reconnect). */
  onListening?: () => void;
}

/**
 * Holds a LISTEN on a channel that triggers notify (e.g. an API key revoked, migration 017), on a connection of its
 * own. `listening` is true only while that connection is up: notifications sent while it is down are lost, so
 * onLost tells the owner to forget what it cached, and the listener reconnects (then onListening, if given).
 */
export class ChannelListener {
  listening = false;
  private client?: Client;
  private stopped = false;
  private retry?: NodeJS.Timeout;

  constructor(
    private readonly db: Database,
    private readonly channel: string,
    private readonly handlers: ChannelHandlers,
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
        if (n.channel === this.channel && n.payload) this.handlers.onNotified(n.payload);
      });
      await client.query(`LISTEN ${this.channel}`);
      this.client = client;
      this.listening = true;
      this.handlers.onListening?.();
    } catch (err) {
      if (client) this.lose(client, err as Error);
      else this.scheduleRetry();
    }
  }

  /**
   * Drops the connection and listens again on a new one (onLost, then onListening once back): after a network
   * partition a connection may stay open and silent, and notifications sent meanwhile never come.
   */
  restart(reason: string): void {
    if (this.client) this.lose(this.client, new Error(`listener on ${this.channel} restarted: ${reason}`));
  }

  private lose(client: Client, err?: Error): void {
    if (this.client === client) this.client = undefined;
    this.listening = false;
    this.handlers.onLost();
    client.removeAllListeners('notification');
    client.removeAllListeners('end');
    client.removeAllListeners('error');
    client.on('error', () => {
      /* already given up */
    });
    try {
      client.release(err ?? new Error(`listener on ${this.channel} lost`));
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
    await client.query(`UNLISTEN ${this.channel}`).catch(() => undefined);
    client.release(true);
  }
}
