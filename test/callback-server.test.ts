import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { test } from 'node:test';
import { startCallbackServer, type MountDecider } from '../src/provisioning/index.js';

// The callback server reads HTTP by hand (src/provisioning/callback-wire.ts): what HAProxy's Lua client sends (chunked,
// on a connection it keeps), what libcurl sends (Content-Length), and what it must refuse.
const auth = { user: 'icecast-callback', password: 'a-secret-of-this-run' };
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

function decider(asked: string[]): MountDecider {
  return {
    authorizeSource: () => ({ accept: false, message: 'no' }),
    authorizeListener: ({ mount }) => {
      asked.push(mount);
      return mount === '/full' ? { accept: false, message: 'full' } : { accept: true };
    },
    listenerLeft: () => undefined,
    mountAdded: () => undefined,
    mountRemoved: () => undefined,
  };
}

const TICKET = `proxy-${'0123abcd-0000-4000-8000-00000000000a'}`;
const form = (mount: string) =>
  `action=listener_add&mount=${encodeURIComponent(mount)}&client=7&user=x&pass=y&ip=1.2.3.4`;

/** A HAProxy-like request: chunked, split into chunks of the body. */
function chunked(target: string, body: string, authorization: string): string {
  const half = Math.floor(body.length / 2);
  const chunk = (s: string) => `${Buffer.byteLength(s).toString(16)}\r\n${s}\r\n`;
  return (
    `POST ${target} HTTP/1.1\r\ncontent-type: application/x-www-form-urlencoded\r\nhost: 127.0.0.1\r\n` +
    `authorization: ${authorization}\r\nuser-agent: HAProxy\r\ntransfer-encoding: chunked\r\n\r\n` +
    `${chunk(body.slice(0, half))}${chunk(body.slice(half))}0\r\n\r\n`
  );
}

/** Writes `text` byte by byte when `slowly`, and collects what comes back until the server closes or `answers` came. */
async function exchange(port: number, text: string, answers: number, slowly = false) {
  const socket = net.connect(port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  let received = '';
  let closed = false;
  const done = new Promise<void>((resolve) => {
    socket.on('data', (d) => {
      received += d.toString('latin1');
      if ((received.match(/HTTP\/1\.1 /g) ?? []).length >= answers && received.endsWith('\r\n\r\n')) resolve();
    });
    socket.on('close', () => {
      closed = true;
      resolve();
    });
  });
  if (slowly) for (const byte of Buffer.from(text)) socket.write(Buffer.from([byte]));
  else socket.write(text);
  await done;
  await new Promise((resolve) => setTimeout(resolve, 50));
  socket.destroy();
  return { received, closed };
}

test('the callback server answers chunked requests on a kept connection, refuses a wrong secret and junk', async () => {
  const asked: string[] = [];
  const server = await startCallbackServer({ decider: decider(asked), auth });
  try {
    const good = basic(auth.user, auth.password);
    const listener = (mount: string) => form(mount).replace('action=listener_add', 'action=proxy_listener_add');
    const proxied = (mount: string) => listener(mount).replace('user=x', `user=${TICKET}`);
    // Two requests on one connection, the second sent byte by byte: both answered, in order, the connection kept.
    const two =
      chunked('/icecast/proxy_listener_add', proxied('/live'), good) +
      chunked('/icecast/proxy_listener_add', proxied('/full'), good);
    const kept = await exchange(server.port, two, 2, true);
    const answers = kept.received.split('HTTP/1.1 ').slice(1);
    assert.equal(answers.length, 2, kept.received);
    assert.match(answers[0], /^200 OK\r\n[\s\S]*icecast-auth-user: 1\r\n/);
    assert.match(answers[1], /^200 OK\r\n/);
    assert.doesNotMatch(answers[1], /icecast-auth-user/);
    assert.match(answers[1], /icecast-auth-message: full/);
    assert.equal(kept.closed, false, 'the connection stays open for the next request');
    assert.deepEqual(asked, ['/live', '/full']);

    // A wrong secret: 401, the decider never asked, the connection closed.
    const wrong = await exchange(
      server.port,
      chunked('/icecast/proxy_listener_add', proxied('/live'), basic(auth.user, 'guess')),
      1,
    );
    assert.match(wrong.received, /^HTTP\/1\.1 401 /);
    assert.equal(wrong.closed, true);
    const none = await exchange(server.port, chunked('/icecast/proxy_listener_add', proxied('/live'), ''), 1);
    assert.match(none.received, /^HTTP\/1\.1 401 /);
    assert.deepEqual(asked, ['/live', '/full']);

    // Malformed: a 400 and the connection closed.
    for (const junk of [
      'GET /icecast/x HTTP/2\r\n\r\n',
      'POST /icecast/proxy_listener_add HTTP/1.1\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n',
      'POST /icecast/proxy_listener_add HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n',
      `POST /icecast/proxy_listener_add HTTP/1.1\r\ncontent-length: ${64 * 1024}\r\n\r\n`,
      `POST /icecast/proxy_listener_add HTTP/1.1\r\nx: ${'a'.repeat(9000)}\r\n\r\n`,
    ]) {
      const bad = await exchange(server.port, junk, 1);
      assert.match(bad.received, /^HTTP\/1\.1 400 /, junk.slice(0, 60));
      assert.equal(bad.closed, true);
    }

    // What libcurl sends (Content-Length), through an ordinary client.
    const answer = await fetch(`${server.url}/icecast/listener_add`, {
      method: 'POST',
      headers: { authorization: good, 'content-type': 'application/x-www-form-urlencoded' },
      body: form('/live'),
    });
    assert.equal(answer.status, 200);
    assert.equal(answer.headers.get('icecast-auth-user'), '1');
    const elsewhere = await fetch(`${server.url}/other`, { method: 'POST', headers: { authorization: good } });
    assert.equal(elsewhere.status, 404);
  } finally {
    await server.close();
  }
});

test("the callback server's listen backlog holds a burst of HAProxy's admissions (node's default 511 dropped SYNs)", async () => {
  const server = await startCallbackServer({ decider: decider([]), auth });
  try {
    // For a listening socket, ss's Send-Q is its backlog; the kernel caps it at net.core.somaxconn.
    const line = spawnSync('ss', ['-Hltn', `sport = :${server.port}`], { encoding: 'utf8' }).stdout.trim();
    const backlog = Number(line.split(/\s+/)[2]);
    const somaxconn = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
    assert.equal(backlog, Math.min(4096, somaxconn), line);
  } finally {
    await server.close();
  }
});
