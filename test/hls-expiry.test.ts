import assert from 'node:assert/strict';
import { spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { buyInstantStream } from './support/live-stream.js';
import { request, startService, type Service } from './support/service.js';
import { expireIn } from './support/expiry.js';
import { startFfmpegSource, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';

// A service's HLS ends with it when it expires: its playlists answer 410, its rendition stops and its files go.
requireStreamingTools();

let service: Service;
let encoder: ChildProcess | undefined;

before(async () => {
  service = await startService({ LIFECYCLE_INTERVAL_MS: '250' });
});
after(async () => {
  encoder?.kill('SIGKILL');
  await service?.stop();
});

describe('HLS at expiry', () => {
  test('the playlists answer 410 and the rendition is gone once the service expires', async () => {
    const svc = await buyInstantStream(service, 'Brief FM', {
      duration_hours: 1,
      max_listeners: 2,
      bitrate_kbps: 64,
    });
    encoder = startFfmpegSource(svc.broadcast_url);
    const master = await waitFor(
      'the HLS playlist',
      async () => {
        const answer = await fetch(svc.endpoints.hls_url);
        return answer.status === 200 ? answer.text() : (await answer.arrayBuffer(), undefined);
      },
      40_000,
    );
    const media = new URL(
      master.split('\n').find((line) => line.includes('live.m3u8?session='))!,
      svc.endpoints.hls_url,
    );
    // Its media playlist takes a place and starts the rendition (503 until the source is up).
    await waitFor(
      'the media playlist',
      async () => {
        const answer = await fetch(media);
        await answer.arrayBuffer();
        return answer.status === 200;
      },
      40_000,
    );
    const dir = join(service.dataDir, 'hls', svc.service_id);
    assert.ok(existsSync(dir));
    // Live and played: now let it end in a few seconds rather than wait out a paid time that covers a slow start.
    await expireIn(service, svc.service_id, 3);

    // The player keeps polling, as players do (about once a segment, not 20 times a second), until the stream ends.
    const ended = await pollEvery(
      1000,
      'the HLS playlist to end',
      async () => {
        const answer = await fetch(media);
        const body = await answer.text();
        return answer.status !== 200 && { status: answer.status, body: JSON.parse(body) };
      },
      90_000,
    );
    assert.equal(ended.status, 410);
    assert.equal(ended.body.error.code, 'service_not_active');
    assert.match(ended.body.error.message, /has ended \(the service is expired\)/);
    assert.equal((await fetch(svc.endpoints.hls_url)).status, 410);
    await waitFor('the rendition to be removed', () => !existsSync(dir), 15_000);
    const usage = await waitFor(
      'the HLS place to be freed and the service expired',
      async () => {
        const u = (await request(service, 'GET', `/services/${svc.service_id}/usage`)).body.usage;
        // The place goes at the clock's expiry; the status once the life-cycle pass marks it.
        return u.listeners.current === 0 && u.status === 'expired' && u;
      },
      15_000,
    );
    assert.equal(usage.status, 'expired');
    assert.ok(usage.bytes.sent_to_listeners > 0, 'the HLS bytes stay in the usage');
  });
});

/** Like waitFor, at a player's pace. */
async function pollEvery<T>(ms: number, what: string, probe: () => Promise<T | false>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, ms));
  }
}
