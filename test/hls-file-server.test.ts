import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { HlsFileServer } from '../src/provisioning/hls-file-server.js';
import { listeningProcess } from './support/hls-player.js';
import { requireStreamingTools } from './support/system-tools.js';
import { waitFor } from './support/streaming.js';

// nginx as the HLS segment server, supervised: only published segment names answer, with the cache headers; killed,
// it comes back on the same port; stopped, its port is free.
requireStreamingTools(['nginx']);

const SERVICE = 'svc_filesrv_test';
const NAME = 'seg1700000000-AbCdEfGhIjKl.ts';
let dir: string;
let server: HlsFileServer;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hls-file-server-'));
  await chmod(dir, 0o755);
  await mkdir(join(dir, 'hls', SERVICE), { recursive: true, mode: 0o755 });
  await writeFile(join(dir, 'hls', SERVICE, NAME), Buffer.alloc(5000, 7), { mode: 0o644 });
  await writeFile(join(dir, 'hls', SERVICE, 'seg1700000000.ts'), Buffer.alloc(5000, 7), { mode: 0o644 });
  server = new HlsFileServer({
    runDir: join(dir, 'run'),
    hlsDir: join(dir, 'hls'),
    host: '127.0.0.1',
    segmentMaxAgeSeconds: 32,
  });
  await server.start();
});
after(async () => {
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('HLS file server (nginx)', () => {
  test('serves published segment names only, cacheable; everything else a 404 kept by no cache', async () => {
    const base = `${server.publicUrl}/hls/${SERVICE}/`;
    assert.equal(listeningProcess(base), 'nginx');
    const segment = await fetch(base + NAME);
    assert.equal(segment.status, 200);
    assert.equal((await segment.arrayBuffer()).byteLength, 5000);
    assert.equal(segment.headers.get('cache-control'), 'public, max-age=32');
    assert.equal(segment.headers.get('content-type'), 'video/mp2t');
    assert.equal(segment.headers.get('access-control-allow-origin'), '*');
    const misses = ['seg1700000000.ts', 'seg1700000000-AbCdEfGhIjKm.ts', '../run/nginx.conf', 'live.m3u8'];
    for (const name of misses) {
      const miss = await fetch(base + name);
      assert.equal(miss.status, 404, name);
      assert.equal(miss.headers.get('cache-control'), 'no-store', name);
      await miss.arrayBuffer();
    }
    const post = await fetch(base + NAME, { method: 'POST', body: 'x' });
    assert.notEqual(post.status, 200);
    await post.arrayBuffer();
  });

  test('killed, it is restarted on the same port; stopped, the port is free', async () => {
    const [pid, port] = [server.pid!, server.port];
    process.kill(pid, 'SIGKILL');
    await waitFor('nginx restarted', () => server.pid !== undefined && server.pid !== pid, 15_000);
    assert.equal(server.port, port);
    await waitFor(
      'it answers again',
      async () => (await fetch(`${server.publicUrl}/hls/${SERVICE}/${NAME}`).catch(() => undefined))?.status === 200,
      15_000,
    );
    await server.stop();
    assert.equal(listeningProcess(server.publicUrl), undefined);
  });
});
