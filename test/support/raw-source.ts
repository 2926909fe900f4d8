import net from 'node:net';
import { waitFor } from './streaming.js';

/** A raw client's socket and what it received: an encoder's or a listener's request as sent byte for byte. */
export interface RawClient {
  socket: net.Socket;
  received: () => string;
  closed: Promise<void>;
}

const clients = new Set<net.Socket>();

/** A raw client from `from` that sends `head` (and, for a source, a few bytes of body) to `port`. */
export function rawClient(port: number, head: string, from: string): Promise<RawClient> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1', localAddress: from });
    clients.add(socket);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => undefined);
    const closed = new Promise<void>((done) => socket.once('close', () => done()));
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.write(head);
      resolve({ socket, received: () => Buffer.concat(chunks).toString('latin1'), closed });
    });
  });
}

/** Closes every raw client still open (a test file's `after`). */
export function closeRawClients(): void {
  for (const socket of clients) socket.destroy();
  clients.clear();
}

export const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

/** A source's PUT as an encoder sends it. */
export const sourcePut = (mount: string, authorization: string) =>
  `PUT ${mount} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${authorization}\r\nContent-Type: audio/mpeg\r\n` +
  'Ice-Public: 0\r\n\r\n';

/** The status of the answer once it came, 0 when the connection closed unanswered. */
export async function statusOf(client: RawClient, timeoutMs = 15_000): Promise<number> {
  return waitFor(
    'an answer',
    () => {
      const m = /^HTTP\/1\.\d (\d{3})/.exec(client.received());
      if (m) return Number(m[1]);
      return client.socket.destroyed ? -1 : undefined;
    },
    timeoutMs,
  ).then((s) => Math.max(0, s));
}
