import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { buy } from './support/purchase.js';
import { request, scratchDir, type Service, startService } from './support/service.js';
import { exitOf, hasMpegFrame, listenWhenLive, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { liveToneSource, playedSeconds, sine } from './support/tones.js';
import { TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';

// Recordings where a show does not simply start and stop on one host: a service with AutoDJ records only its live
// encoder's show; a host lost while it records leaves a show that continues on the host the service moves to when
// the encoder comes back there, and ends by itself when it does not; both stay listed and playable. The product
// that has no recording storage (temporary-autodj) refuses recording with the reason.
requireStreamingTools(['icecast2', 'ffmpeg']);
const DOWN_AFTER_SECONDS = 3;
const pool = {
  HOST_DOWN_AFTER_SECONDS: String(DOWN_AFTER_SECONDS),
  HOST_HEARTBEAT_MS: '500',
  LIFECYCLE_INTERVAL_MS: '250',
  WEBHOOK_SECRETS_KEY: randomBytes(32).toString('base64'),
  // A show's gap outlasts the move to the other host and the source's return there with room for a loaded machine,
  // at half of production's minute.
  RECORDING_GAP_SECONDS: '30',
};
/** The wait for a show's end after its last source: a service that ignored the gap (production's minute) fails it. */
const SHOW_END_MS = 50_000;
const LIVE_SECONDS = 6;
const BACK_SECONDS = 5;

let a: Service;
let b: Service;
let wallet: TestWallet;
let shared: Record<string, string>;
let mediaDir: string;
const children: ChildProcess[] = [];
/** The AutoDJ service's recording of its live show (test 2), checked complete at the end. */
let autodjShow: { serviceId: string; recordingId: string };

const owner = (serviceId: string, method: string, path: string, body?: unknown) =>
  request({ baseUrl: a.baseUrl, apiKey: a.apiKey }, method, `/services/${serviceId}${path}`, { body });
const keep = (child: ChildProcess) => {
  children.push(child);
  return child;
};
const recordingsOf = async (serviceId: string) => (await owner(serviceId, 'GET', '/recordings')).body.recordings;

async function buyStream(parameters: Record<string, unknown>, product = 'event-stream') {
  const bought = await buy({ baseUrl: a.baseUrl, apiKey: a.apiKey }, wallet, {
    product_id: product,
    email: 'owner@example.com',
    station_name: 'Moving Radio',
    parameters,
  });
  assert.equal(bought.status, 200, JSON.stringify(bought.body));
  return bought.body.service;
}

/** Recording services on host B (A drained meanwhile), each with a live source sending `seconds` of tone. */
async function recordingOnB(count: number, seconds: number) {
  const cli = async (args: string[]) => {
    const done = await a.cli(args);
    assert.equal(done.code, 0, done.stderr);
  };
  await cli(['hosts', 'drain', 'host-a']);
  const services = [];
  for (let i = 0; i < count; i++) {
    services.push(await buyStream({ duration_hours: 2, max_listeners: 5, bitrate_kbps: 64, recording: true }));
  }
  await cli(['hosts', 'undrain', 'host-a']);
  const startedAt = Date.now();
  const shows = await Promise.all(
    services.map(async (svc) => {
      const source = keep(liveToneSource(svc.broadcast_url, seconds));
      (await listenWhenLive(svc.stream_url, 30_000)).close();
      return { svc, source };
    }),
  );
  return { startedAt, shows };
}

/** The files a show has in its service's media directory (every host's part, whatever host wrote it). */
const showFiles = async (serviceId: string, recordingId: string) =>
  (await readdir(join(mediaDir, serviceId))).filter((name) => name.startsWith(`.recording-${recordingId}.`));

const complete = (serviceId: string, timeoutMs: number) =>
  waitFor(
    'the show to end the gap after its last source',
    async () => {
      const items = await recordingsOf(serviceId);
      return items.length === 1 && items[0].status === 'complete' && items[0];
    },
    timeoutMs,
  );

before(async () => {
  mediaDir = await scratchDir('recordings-media-');
  a = await startService({ ...pool, MEDIA_DIR: mediaDir, STREAMING_HOST_ID: 'host-a' });
  const lock = JSON.parse(await readFile(join(a.dataDir, 'serve.lock'), 'utf8'));
  const dev = await devFile(a.dataDir);
  wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  shared = {
    MEDIA_DIR: mediaDir,
    DATABASE_URL: lock.database_url,
    CHAIN_RPC_URL: dev.chain.rpc_url,
    DEV_FACILITATOR_ACCOUNT: '4',
  };
});

after(async () => {
  for (const child of children) child.kill('SIGKILL');
  await b?.stop();
  await a?.stop();
});

describe('recordings with AutoDJ and across a lost host', () => {
  test('temporary-autodj has no recording storage: recording is refused, with the reason', async () => {
    const parameters = { duration_hours: 1, bitrate_kbps: 64, storage_mb: 5 };
    const quote = await request(a, 'POST', '/quotes', {
      body: { product_id: 'temporary-autodj', parameters: { ...parameters, recording: true } },
    });
    assert.equal(quote.status, 422, JSON.stringify(quote.body));
    assert.match(JSON.stringify(quote.body.error), /recording/);
    const svc = await buyStream(parameters, 'temporary-autodj');
    const refused = await owner(svc.service_id, 'PUT', '/recording', { enabled: true });
    assert.equal(refused.status, 422, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'recording_not_offered');
    assert.match(refused.body.error.message, /no recording storage: its product does not record/);
    const usage = (await owner(svc.service_id, 'GET', '/usage')).body.usage;
    assert.equal(usage.recording_storage, undefined, 'no recording storage in its usage');
  });

  test('with AutoDJ only the live show is recorded, not what AutoDJ plays', { timeout: 120_000 }, async () => {
    const svc = await buyStream({
      duration_hours: 1,
      max_listeners: 5,
      bitrate_kbps: 64,
      autodj: true,
      recording: true,
    });
    const file = await sine({ seconds: 3, frequency: 660 }, ['-c:a', 'libmp3lame', '-f', 'mp3']);
    assert.ok(file.length > 1000);
    const put = await request(a, 'PUT', `/services/${svc.service_id}/files/fill.mp3`, {
      rawBody: file,
      headers: { 'content-type': 'audio/mpeg' },
    });
    assert.equal(put.status, 201, JSON.stringify(put.body));
    const filler = await listenWhenLive(svc.stream_url, 30_000);
    await waitFor('AutoDJ audio', () => hasMpegFrame(filler.received()) && filler.received().length > 16_000, 20_000);
    filler.close();
    assert.deepEqual(await recordingsOf(svc.service_id), [], 'AutoDJ is not recorded');

    const live = keep(liveToneSource(svc.broadcast_url, LIVE_SECONDS));
    assert.equal(await exitOf(live, (LIVE_SECONDS + 30) * 1000), 0, 'the live encoder sent its show');
    const [show] = await waitFor('the live show recorded', async () => {
      const items = await recordingsOf(svc.service_id);
      return items.length === 1 && items[0].size_bytes > 0 && items;
    }).catch(async (err: Error) => {
      const said = a
        .output()
        .split('\n')
        .filter((line) => /record|capture|autodj|mount|"level":"(warn|error)"/i.test(line));
      throw new Error(
        `${err.message}: ${JSON.stringify(await recordingsOf(svc.service_id))}\n${said.slice(-15).join('\n')}`,
      );
    });
    autodjShow = { serviceId: svc.service_id, recordingId: show.recording_id };
    const back = await listenWhenLive(svc.stream_url, 30_000);
    await waitFor('AutoDJ plays again', () => back.received().length > 16_000, 20_000);
    back.close();
  });

  test('a host lost while it records: the show continues on the new host, or ends', { timeout: 300_000 }, async () => {
    b = await startService({ ...pool, ...shared, STREAMING_HOST_ID: 'host-b' });
    const {
      startedAt,
      shows: [back, gone, dropped],
    } = await recordingOnB(3, 120);
    for (const { svc } of [back, gone, dropped]) {
      await waitFor('B records the show', async () => (await recordingsOf(svc.service_id))[0]?.size_bytes > 24_000);
    }
    b.process.kill('SIGKILL');
    await exitOf(b.process, 10_000);
    // What B can have recorded: the time from the sources' start to the kill.
    const sentOnB = (Date.now() - startedAt) / 1000;
    const moved = await waitFor(
      'the services to move to host A',
      async () => {
        const read = await Promise.all(
          [back, gone, dropped].map(async ({ svc }) => (await owner(svc.service_id, 'GET', '')).body),
        );
        return (
          read.every((r) => new URL(r.service.broadcast_url).host !== new URL(back.svc.broadcast_url).host) && read
        );
      },
      (DOWN_AFTER_SECONDS + 30) * 1000,
    );
    const again = keep(liveToneSource(moved[0].service.broadcast_url, BACK_SECONDS));
    const droppedAgain = keep(liveToneSource(moved[2].service.broadcast_url, BACK_SECONDS));
    assert.equal(await exitOf(again, (BACK_SECONDS + 30) * 1000), 0, 'the encoder sent its show on host A');
    assert.equal(await exitOf(droppedAgain, (BACK_SECONDS + 30) * 1000), 0, 'and the one of the show deleted');
    await deletedBetweenSessions(dropped.svc.service_id);

    const [continued, ended] = await Promise.all([
      complete(back.svc.service_id, SHOW_END_MS),
      complete(gone.svc.service_id, SHOW_END_MS),
    ]);
    assert.equal(continued.source_sessions, 2, 'one show over two hosts');
    const played = await playedSeconds(continued.download_url);
    assert.ok(Math.abs(played - continued.duration_seconds) <= 0.5, `${continued.duration_seconds} s, plays ${played}`);
    assert.ok(played >= 3 + BACK_SECONDS - 1, `B's part and A's (${played} s)`);
    assert.ok(played <= sentOnB + BACK_SECONDS + 1, `no more than was sent (${played} s, ${sentOnB} s on B)`);
    assert.equal(ended.source_sessions, 1);
    assert.equal(ended.stop_reason, null);
    const endedPlays = await playedSeconds(ended.download_url);
    assert.ok(endedPlays >= 3 && endedPlays <= sentOnB + 1, `what B recorded (${endedPlays} s)`);
    assert.ok(Math.abs(endedPlays - ended.duration_seconds) <= 0.5);
    const feed = await (await fetch(`${a.baseUrl}/services/${gone.svc.service_id}/podcast.xml`)).text();
    assert.ok(feed.includes(ended.download_url), 'listed in its feed');
  });

  /**
   * An open show deleted between its source's sessions, no capture running anywhere: B's part and A's file go with
   * it, and the storage it took is free again.
   */
  async function deletedBetweenSessions(serviceId: string): Promise<void> {
    const [open] = await waitFor('the show paused on A', async () => {
      const items = await recordingsOf(serviceId);
      return items[0]?.source_sessions === 2 && items[0].status === 'recording' && items;
    });
    await waitFor(
      'the paused show in two files',
      async () => (await showFiles(serviceId, open.recording_id)).length === 2,
    );
    const used = async () => (await owner(serviceId, 'GET', '/recordings')).body.recording.storage.used_bytes;
    assert.ok((await used()) > 24_000);
    const deleted = await owner(serviceId, 'DELETE', `/recordings/${open.recording_id}`);
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
    assert.deepEqual(await showFiles(serviceId, open.recording_id), [], "every host's part removed");
    assert.equal(await used(), 0);
  }

  test('the AutoDJ service recorded its live show alone', { timeout: 120_000 }, async () => {
    const show = await complete(autodjShow.serviceId, 100_000);
    assert.equal(show.recording_id, autodjShow.recordingId);
    assert.equal(show.source_sessions, 1);
    assert.ok(Math.abs(show.duration_seconds - LIVE_SECONDS) <= 1, `${show.duration_seconds} s, sent ${LIVE_SECONDS}`);
    assert.ok(Math.abs((await playedSeconds(show.download_url)) - LIVE_SECONDS) <= 1);
  });
});
