import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Database } from '../store/index.js';

/** A session token: 16 random bytes and 12 bytes of HMAC over them and the service, base64url (38 characters). */
const TOKEN = /^[A-Za-z0-9_-]{38}$/;
const ID_CHARS = 22;

/**
 * Signs what HLS hands out, with a secret kept in PostgreSQL (the same for every instance): session tokens, so that
 * only a token index.m3u8 issued for this service takes a place; and segment names, which carry a tag of their
 * number, so that a segment is reached only through a playlist yet has one address for every listener.
 */
export class HlsSigner {
  private secret?: Promise<Buffer>;

  constructor(private readonly db: Database) {}

  async token(serviceId: string): Promise<string> {
    const id = randomBytes(16).toString('base64url');
    return id + (await this.mac(`session\n${serviceId}\n${id}`, 12));
  }

  async tokenValid(serviceId: string, token: string): Promise<boolean> {
    if (!TOKEN.test(token)) return false;
    const expected = Buffer.from(await this.mac(`session\n${serviceId}\n${token.slice(0, ID_CHARS)}`, 12));
    const sent = Buffer.from(token.slice(ID_CHARS));
    return sent.length === expected.length && timingSafeEqual(sent, expected);
  }

  /** The tag of segment `number` of the service's rendition (12 characters). */
  segmentTag(serviceId: string, number: number): Promise<string> {
    return this.mac(`segment\n${serviceId}\n${number}`, 9);
  }

  private async mac(text: string, bytes: number): Promise<string> {
    const digest = createHmac('sha256', await this.key())
      .update(text)
      .digest();
    return digest.subarray(0, bytes).toString('base64url');
  }

  /** The secret, created once by the first instance that needs it. */
  private key(): Promise<Buffer> {
    this.secret ??= (async () => {
      await this.db.query('INSERT INTO hls_signing_secret (id, secret) VALUES (1, $1) ON CONFLICT DO NOTHING', [
        randomBytes(32),
      ]);
      const [row] = await this.db.query<{ secret: Buffer } & Record<string, unknown>>(
        'SELECT secret FROM hls_signing_secret WHERE id = 1',
      );
      return row.secret;
    })();
    this.secret.catch(() => {
      this.secret = undefined;
    });
    return this.secret;
  }
}
