import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { buyInstantStream } from './support/live-stream.js';
import { request, startService, type Service } from './support/service.js';
import { listenWhenLive, rawListener, type RawListener, startFfmpegSource, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';

// With ICECAST_PROXY=haproxy, an encoder's title update (GET /admin/metadata with the service's source credentials)
// is decided by serve like a source, and reaches Icecast only with Icecast's own credentials; nothing else of /admin
// passes from the public port.
requireStreamingTools(['icecast2', 'ffmpeg', 'haproxy']);

let service: Service;
let encoder: ChildProcess | undefined;
let held: RawListener | undefined;
let svc: any;
let other: any;

const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

/** A service's source user and password, from its broadcast URL. */
function sourceCredentials(service: { broadcast_url: string }): [string, string] {
  const url = new URL(service.broadcast_url.replace(/^icecast:/, 'http:'));
  return [decodeURIComponent(url.username), decodeURIComponent(url.password)];
}

/** Icecast's loopback port and credentials, from its config. */
async function icecast() {
  const xml = await readFile(join(service.dataDir, 'icecast', 'icecast.xml'), 'utf8');
  const text = (tag: string) => new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml)?.[1] ?? '';
  return {
    port: Number(text('port')),
    admin: basic(text('admin-user'), text('admin-password')),
    source: basic('source', text('source-password')),
  };
}

/** The title Icecast's stats give the mount, read on its loopback port with its admin credentials. */
async function icecastTitle(mount: string): Promise<string | undefined> {
  const ice = await icecast();
  const res = await fetch(`http://127.0.0.1:${ice.port}/admin/stats`, { headers: { authorization: ice.admin } });
  const xml = await res.text();
  const source = xml.split('<source mount=').find((part) => part.startsWith(`"${mount}"`));
  return source ? (/<title>([^<]*)<\/title>/.exec(source)?.[1] ?? '') : undefined;
}

/** What the public port answers a raw request head (its status line and body), from 127.0.0.1. */
function ask(head: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const port = Number(new URL(svc.stream_url).port);
    const socket = net.connect(port, '127.0.0.1', () => socket.write(head));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.once('error', reject);
    socket.once('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.setTimeout(15_000, () => socket.destroy());
  });
}

const headOf = (line: string, authorization: string) =>
  `${line}\r\nHost: 127.0.0.1\r\nUser-Agent: title-test\r\nAuthorization: ${authorization}\r\n\r\n`;

/** An encoder's title update as BUTT or a script sends it: the query encoded, the mount's source credentials. */
const updinfo = (mount: string, song: string) =>
  `GET /admin/metadata?${new URLSearchParams({ mount, mode: 'updinfo', song })} HTTP/1.0`;

const REFUSED = /^HTTP\/1\.0 401 Authentication Required\r\nServer: Icecast 2\.4\.4\r\n[\s\S]*You need to authenticate/;

describe('encoder title updates through HAProxy (ICECAST_PROXY=haproxy)', () => {
  before(async () => {
    service = await startService({ ICECAST_PROXY: 'haproxy' });
    svc = await buyInstantStream(service, 'Titles FM', { duration_hours: 1, max_listeners: 1, bitrate_kbps: 64 });
    other = await buyInstantStream(service, 'Other FM', { duration_hours: 1, max_listeners: 1, bitrate_kbps: 64 });
    encoder = startFfmpegSource(svc.broadcast_url);
    (await listenWhenLive(svc.stream_url, 30_000)).close();
  });
  after(async () => {
    held?.close();
    encoder?.kill('SIGKILL');
    await service?.stop();
  });

  test("the mount's source credentials set the title: in Icecast's stats and now playing", async () => {
    const mount = new URL(svc.stream_url).pathname;
    const answer = await ask(headOf(updinfo(mount, 'Live Band - Live Song'), basic(...sourceCredentials(svc))));
    assert.match(answer, /^HTTP\/1\.0 200 OK\r\n[\s\S]*Metadata update successful/, answer);
    await waitFor('the title in Icecast', async () => (await icecastTitle(mount)) === 'Live Band - Live Song', 10_000);
    const playing = await waitFor(
      'the live title',
      async () => {
        const now = (await request(service, 'GET', `/services/${svc.service_id}/now-playing`)).body.now_playing;
        return now?.title === 'Live Song' && now;
      },
      20_000,
    );
    assert.equal(playing.artist, 'Live Band');
    assert.equal(playing.source, 'live');
  });

  test('other credentials, other /admin requests and other shapes are refused by HAProxy: Icecast never sees them', async () => {
    const mount = new URL(svc.stream_url).pathname;
    const otherMount = new URL(other.stream_url).pathname;
    const [user, pass] = sourceCredentials(svc);
    const ice = await icecast();
    const before = await icecastTitle(mount);
    assert.equal(before, 'Live Band - Live Song');
    const refused: [string, string][] = [
      ['a wrong password', headOf(updinfo(mount, 'marker-wrong'), basic(user, `${pass}x`))],
      ["another service's credentials", headOf(updinfo(mount, 'marker-other'), basic(...sourceCredentials(other)))],
      ["Icecast's own admin credentials", headOf(updinfo(mount, 'marker-admin'), ice.admin)],
      ["Icecast's own source credentials", headOf(updinfo(mount, 'marker-source'), ice.source)],
      ['no credentials', `${updinfo(mount, 'marker-none')}\r\nHost: 127.0.0.1\r\n\r\n`],
      // Icecast acts on the last of a key given twice: serve must be asked about the mount Icecast would change.
      [
        'the mount given twice',
        headOf(
          `GET /admin/metadata?mount=${encodeURIComponent(otherMount)}&mount=${encodeURIComponent(mount)}&mode=updinfo&song=marker-twice HTTP/1.0`,
          basic(...sourceCredentials(other)),
        ),
      ],
      ['no mode', headOf(`GET /admin/metadata?mount=${mount}&song=marker-nomode HTTP/1.0`, basic(user, pass))],
      [
        'another mode',
        headOf(`GET /admin/metadata?mount=${mount}&mode=x&song=marker-mode HTTP/1.0`, basic(user, pass)),
      ],
      ['stats', headOf('GET /admin/stats HTTP/1.0', ice.admin)],
      ['stats in lower case', headOf('get /admin/stats HTTP/1.0', ice.admin)],
      ["Icecast's STATS method", headOf('STATS / HTTP/1.0', ice.admin)],
      ['listclients', headOf(`GET /admin/listclients?mount=${mount} HTTP/1.0`, basic(user, pass))],
      ['killsource', headOf(`GET /admin/killsource?mount=${mount} HTTP/1.0`, ice.admin)],
      ['moveclients', headOf(`GET /admin/moveclients?mount=${mount}&destination=${otherMount} HTTP/1.0`, ice.admin)],
      ['a source on /admin', headOf('PUT /admin/x HTTP/1.1', ice.source)],
    ];
    for (const [what, head] of refused) assert.match(await ask(head), REFUSED, what);

    await sleep(2000);
    assert.equal(await icecastTitle(mount), before, 'the title unchanged');
    const now = (await request(service, 'GET', `/services/${svc.service_id}/now-playing`)).body.now_playing;
    assert.equal(now.title, 'Live Song');
    // Icecast's access log names what came through HAProxy (from its address): of /admin, the one update let in.
    const access = await readFile(join(service.dataDir, 'icecast', 'access.log'), 'utf8');
    const throughHaproxy = access.split('\n').filter((line) => line.startsWith('127.0.0.254 '));
    const admin = throughHaproxy.filter((line) => !line.includes(`"GET ${mount} HTTP/1.1" `));
    assert.equal(admin.length, 1, admin.join('\n'));
    assert.match(admin[0], /"GET \/admin\/metadata HTTP\/1\.0" 200 .*"title-test"/);
    assert.equal(await icecastTitle(mount), before, 'the source is still on its mount');
  });

  test('a listener whose method is in lower case is asked about all the same (Icecast reads "get" as GET)', async () => {
    const { port, pathname, search } = new URL(svc.stream_url);
    // The one place taken (once the listener the set-up opened is gone).
    held = await waitFor(
      'the one place taken',
      async () => {
        const listener = await rawListener(Number(port), pathname + search, 'holder');
        const status = await waitFor('an answer', () => listener.status() || undefined, 10_000);
        if (status === 200) return listener;
        listener.close();
      },
      20_000,
    );
    const answer = await ask(`get ${pathname}${search} HTTP/1.0\r\nHost: 127.0.0.1\r\nUser-Agent: lower\r\n\r\n`);
    assert.match(answer, REFUSED, 'over the cap');
  });
});
