import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startService, type Service } from './support/service.js';

// Sockets as an abusive client holds them: bodies never sent, connections never closed.
let service: Service;
let origin: URL;

before(async () => {
  service = await startService({ MAX_CONNECTIONS_PER_IP: '3', RATE_LIMIT_PER_IP: '0', RATE_LIMIT_PER_KEY: '0' });
  origin = new URL(service.baseUrl);
});
after(async () => {
  await service?.stop();
});

interface Connection {
  socket: Socket;
  /** Resolves with the first answer's status line and body (as far as received) once it is complete. */
  answer(): Promise<{ status: number; text: string }>;
  closed: Promise<number>;
}

/** A TCP connection to the service from `localAddress` (any 127.x address reaches the loopback listener). */
function open(localAddress = '127.0.0.1'): Promise<Connection> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: origin.hostname, port: Number(origin.port), localAddress });
    let received = '';
    const waiting: Array<() => void> = [];
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
      waiting.splice(0).forEach((wake) => wake());
    });
    socket.on('error', () => {
      /* a reset after the answer counts as closed */
    });
    const closed = new Promise<number>((done) =>
      socket.on('close', () => {
        done(Date.now());
        waiting.splice(0).forEach((wake) => wake());
      }),
    );
    const answer = () =>
      new Promise<{ status: number; text: string }>((done) => {
        const check = () => {
          const end = received.indexOf('\r\n\r\n');
          const head = end >= 0 ? received.slice(0, end) : '';
          const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? -1);
          if (end < 0 || length < 0 || received.length < end + 4 + length) {
            if (socket.destroyed) return done({ status: 0, text: received });
            return void waiting.push(check);
          }
          const text = received.slice(end + 4, end + 4 + length);
          received = received.slice(end + 4 + length);
          done({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), text });
        };
        check();
      });
    socket.once('connect', () => resolve({ socket, answer, closed }));
    socket.once('error', reject);
  });
}

async function get(connection: Connection, path: string): Promise<{ status: number; body: any }> {
  connection.socket.write(`GET ${origin.pathname}${path} HTTP/1.1\r\nHost: ${origin.host}\r\n\r\n`);
  const { status, text } = await connection.answer();
  return { status, body: JSON.parse(text) };
}

describe('connections', () => {
  test('an error answered before the body was read closes the connection at once', async () => {
    const connection = await open();
    const declared = 50 * 1024 * 1024;
    connection.socket.write(
      `POST ${origin.pathname}/orders HTTP/1.1\r\nHost: ${origin.host}\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n`,
    );
    connection.socket.write(Buffer.alloc(256 * 1024, 0x20)); // a part of the body; the rest never comes
    // The client keeps sending its body slowly, as a slow uplink would.
    const trickle = setInterval(() => {
      if (!connection.socket.destroyed) connection.socket.write(Buffer.alloc(1024, 0x20));
    }, 200);
    const answer = await connection.answer();
    const answeredAt = Date.now();
    assert.equal(answer.status, 401);
    assert.equal(JSON.parse(answer.text).error.code, 'authentication_required');
    // Without Connection: close the server reads the rest of the body until its 30 s request timeout.
    const closedAt = await Promise.race([
      connection.closed,
      new Promise<number>((r) => setTimeout(() => r(-1), 10_000)),
    ]);
    clearInterval(trickle);
    connection.socket.destroy();
    assert.ok(closedAt > 0, 'the server closed the connection');
    assert.ok(closedAt - answeredAt < 2000, `closed ${closedAt - answeredAt} ms after the answer`);
  });

  test('connections over the per-address cap are refused, other addresses are served', async () => {
    const held = await Promise.all([open('127.0.0.2'), open('127.0.0.2'), open('127.0.0.2')]);
    try {
      for (const c of held) assert.equal((await get(c, '/health')).status, 200, 'three connections are allowed');
      assert.equal((await get(held[0], '/products')).status, 200); // built: later GET /products are answered without Koa
      const fourth = await open('127.0.0.2');
      const refused = await get(fourth, '/health');
      assert.equal(refused.status, 429);
      assert.equal(refused.body.ok, false);
      assert.equal(refused.body.error.code, 'too_many_connections');
      assert.equal(refused.body.error.retryable, true);
      assert.match(refused.body.error.message, /already has 3 connections open/);
      await fourth.closed;
      const fifth = await open('127.0.0.2');
      const refusedDocument = await get(fifth, '/products');
      assert.equal(refusedDocument.status, 429, 'the catalog documents are refused alike');
      assert.equal(refusedDocument.body.error.code, 'too_many_connections');
      await fifth.closed;

      const other = await open('127.0.0.3');
      assert.equal((await get(other, '/health')).status, 200, 'another address is not affected');
      other.socket.destroy();

      held.pop()!.socket.destroy();
      await new Promise((resolve) => setTimeout(resolve, 200));
      const again = await open('127.0.0.2');
      assert.equal((await get(again, '/health')).status, 200, 'a closed connection frees its place');
      again.socket.destroy();
    } finally {
      for (const c of held) c.socket.destroy();
    }
  });
});
