import assert from 'node:assert/strict';
import { type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { request, startService, type Service } from './support/service.js';
import { connectListener, hasMpegFrame, startFfmpegSource, waitFor, type Listener } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { boughtService } from './support/live-stream.js';

// A listener over the bought cap is refused with a message that says the listener limit is reached.
requireStreamingTools();

let service: Service;
let encoder: ChildProcess | undefined;
const listeners: Listener[] = [];

before(async () => {
  service = await startService();
});
after(async () => {
  for (const l of listeners) l.close();
  encoder?.kill('SIGKILL');
  await service?.stop();
});

/** Everything Icecast answers a listener, body included. */
function refusal(url: string): Promise<{ status: number; statusMessage: string; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        let body = '';
        res
          .setEncoding('utf8')
          .on('data', (d) => {
            body += d;
          })
          .on('end', () => resolve({ status: res.statusCode ?? 0, statusMessage: res.statusMessage ?? '', body }));
      })
      .once('error', reject);
  });
}

describe('listener limit', () => {
  test('a listener over the cap is refused with "listener limit reached", and the owner sees it', async () => {
    const svc = await boughtService(service, {
      product_id: 'instant-stream',
      email: 'ops@example.com',
      station_name: 'Cap FM',
      parameters: { duration_hours: 1, max_listeners: 1, bitrate_kbps: 64 },
    });
    encoder = startFfmpegSource(svc.broadcast_url);
    const first = await waitFor(
      'the mount to go live',
      async () => {
        const l = await connectListener(svc.stream_url).catch(() => undefined);
        if (l?.status === 200) return l;
        l?.close();
        return undefined;
      },
      20_000,
    );
    listeners.push(first);
    await waitFor('audio', () => hasMpegFrame(first.received()), 10_000);

    const over = await refusal(svc.stream_url);
    assert.equal(over.status, 401);
    // Icecast 2.4.4 (Debian) answers every refused listener with its own 401 "You need to authenticate" and only
    // logs the icecast-auth-message we send (auth_url.c); an Icecast that forwards it shows the listener the same text.
    // With HAProxy (the default ICECAST_PROXY), HAProxy asks serve and answers the same 401: serve logs the reason.
    const said = await waitFor(
      'the message in the log',
      async () => {
        if ((process.env.ICECAST_PROXY || 'haproxy') === 'haproxy')
          return /"msg":"listener refused".*"reason":"([^"]*)"|"reason":"([^"]*)".*"msg":"listener refused"/
            .exec(service.output())
            ?.slice(1)
            .find(Boolean);
        const log = await readFile(join(service.dataDir, 'icecast', 'error.log'), 'utf8');
        return /client auth \(.*listener_add\) failed with "([^"]*)"/.exec(log)?.[1];
      },
      10_000,
    );
    assert.equal(
      said,
      'Listener limit reached: this stream was bought for 1 listener and all are connected; try again when one leaves',
    );

    await refusal(svc.stream_url);
    // Places and refusals reach PostgreSQL shortly after the admission decides (in batches), not before it answers.
    const limitEvents = async () =>
      (await request(service, 'GET', `/services/${svc.service_id}/usage`)).body.usage.events.filter(
        (e: any) => e.code === 'listener_limit_reached',
      );
    await waitFor('the refusal in the history', async () => ((await limitEvents()).length ? true : undefined), 10_000);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const events = await limitEvents();
    assert.equal(events.length, 1, 'two refusals within a minute: one event');
    assert.match(
      events[0].reason,
      /A listener was refused: the stream was bought for 1 listener and all are connected\. An upgrade with more listeners raises the limit\./,
    );
  });
});
