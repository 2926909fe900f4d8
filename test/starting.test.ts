import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { answerStarting } from '../src/http/index.js';

// serve listens before the application is built: a request in that second gets an error document, not a hang.
test('a request that arrives while the service starts gets 503 starting, retryable, with Retry-After', async () => {
  const server = createServer(answerStarting).listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    const { port } = server.address() as AddressInfo;
    const response = await fetch(`http://127.0.0.1:${port}/api/v1/products`, { headers: { 'x-request-id': 'req-1' } });
    assert.equal(response.status, 503);
    assert.equal(response.headers.get('retry-after'), '1');
    assert.equal(response.headers.get('x-request-id'), 'req-1');
    const body = await response.json();
    assert.deepEqual(body, {
      ok: false,
      error: {
        code: 'starting',
        message: 'The service is starting. Retry this same request in a second.',
        retryable: true,
        request_id: 'req-1',
      },
    });
  } finally {
    server.close();
  }
});
