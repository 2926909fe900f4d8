import assert from 'node:assert/strict';
import { spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { HLS_SEGMENT_MAX_AGE_SECONDS } from '../src/hls/url.js';
import { HlsPlayer, listeningProcess } from './support/hls-player.js';
import { buyInstantStream } from './support/live-stream.js';
import { request, startService, type Service } from './support/service.js';
import { startFfmpegSource, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';

// HLS of a bought stream: real AAC segments from the live mount, the bought places shared with Icecast listeners,
// HLS bytes and listeners in the usage, our segmenter never counted, and the rendition gone with the service.
requireStreamingTools(['icecast2', 'ffmpeg', 'ffprobe']);

let service: Service;
let encoder: ChildProcess | undefined;

before(async () => {
  service = await startService();
});
after(async () => {
  encoder?.kill('SIGKILL');
  await service?.stop();
});

interface Fetched {
  status: number;
  headers: Headers;
  bytes: Buffer;
  text: string;
}

/** A GET (outside a player's count: a segment is not charged to a session, a playlist is). */
async function get(url: string): Promise<Fetched> {
  const response = await fetch(url, { signal: AbortSignal.timeout(30_000) });
  const bytes = Buffer.from(await response.arrayBuffer());
  return { status: response.status, headers: response.headers, bytes, text: bytes.toString('utf8') };
}

/** The status Icecast answers a listener (it refuses with 401 when the decider says no). */
function icecastStatus(url: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers }, (res) => {
      resolve(res.statusCode ?? 0);
      req.destroy();
    });
    req.once('error', reject);
  });
}

/**
 * The impostor was refused as such, where the refusal is decided: in Icecast's log (its listener_add callback), or
 * with ICECAST_PROXY=haproxy in serve's log (HAProxy asks serve; serve logs a refused listener's reason, at most
 * once a second per mount, so the impostor asks again, refused each time, until its own reason is the one logged).
 */
async function impostorRefusedAsSuch(streamUrl: string, impostor: Record<string, string>): Promise<void> {
  const mount = new URL(streamUrl).pathname;
  const logged = (line: string) =>
    line.includes('"msg":"listener refused"') &&
    line.includes(`"mount":"${mount}"`) &&
    line.includes('"reason":"not an internal reader"');
  await waitFor(
    'the impostor refused as such',
    async () => {
      if (!service.output().includes('"streaming_proxy":"haproxy"')) {
        const log = await readFile(join(service.dataDir, 'icecast', 'error.log'), 'utf8');
        return log.includes('failed with "not an internal reader"');
      }
      if (service.output().split('\n').some(logged)) return true;
      assert.equal(await icecastStatus(streamUrl, impostor), 401);
    },
    10_000,
  );
}

const uris = (playlist: string) => playlist.split('\n').filter((line) => line && !line.startsWith('#'));

describe('HLS', () => {
  test('a live stream over HLS: within its places, in its usage, through a restart, gone when stopped', async () => {
    const svc = await buyInstantStream(service, 'HLS FM', { duration_hours: 1, max_listeners: 1, bitrate_kbps: 64 });
    const hlsUrl: string = svc.endpoints.hls_url;
    assert.equal(hlsUrl, `${service.baseUrl}/hls/${svc.service_id}/index.m3u8`);
    encoder = startFfmpegSource(svc.broadcast_url);

    // The multivariant playlist names a session of its own (signed, taking no place yet), never kept by a cache.
    const master = await get(hlsUrl);
    assert.equal(master.status, 200);
    assert.match(master.headers.get('content-type') ?? '', /application\/vnd\.apple\.mpegurl/);
    assert.equal(master.headers.get('cache-control'), 'no-store');
    assert.equal(master.headers.get('access-control-allow-origin'), '*');
    const [mediaUri] = uris(master.text);
    // It is fetched from nginx, which answers it itself once serve admitted the session.
    const mediaAddress = `^http://127\\.0\\.0\\.1:\\d+/hls/${svc.service_id}/live\\.m3u8\\?session=([A-Za-z0-9_-]{38})$`;
    const token = new RegExp(mediaAddress).exec(mediaUri)?.[1];
    assert.ok(token, mediaUri);
    assert.equal(listeningProcess(mediaUri), 'nginx');
    let mediaUrl = new URL(mediaUri, hlsUrl).href;

    // Its media playlist takes the place and starts the rendition (503 until the source is up). A player's bytes
    // (playlists and the segments it fetches from them) are what the usage must show.
    const player = new HlsPlayer(mediaUrl);
    await waitFor('the media playlist', async () => (await player.poll()) === 200, 40_000);
    const head = await fetch(mediaUrl, { method: 'HEAD' });
    assert.equal(head.headers.get('cache-control'), 'no-store');
    assert.match(head.headers.get('content-type') ?? '', /application\/vnd\.apple\.mpegurl/);
    assert.match(player.playlist, /#EXT-X-TARGETDURATION:[45]\n/);
    // Segments are plain files served by nginx (its own port, its own process), not by serve.
    const segmentUri = uris(player.playlist).at(-1)!;
    const segmentAddress = new RegExp(
      `^http://127\\.0\\.0\\.1:\\d+/hls/${svc.service_id}/seg\\d+-[A-Za-z0-9_-]{12}\\.ts$`,
    );
    assert.match(segmentUri, segmentAddress);
    assert.notEqual(new URL(segmentUri).port, new URL(service.baseUrl).port);
    assert.equal(listeningProcess(segmentUri), 'nginx');
    const segment = await get(new URL(segmentUri, mediaUrl).href);
    assert.equal(segment.status, 200);
    assert.equal(segment.headers.get('content-type'), 'video/mp2t');
    assert.equal(segment.headers.get('x-hls-segment-server'), 'nginx');
    assert.equal(segment.headers.get('cache-control'), `public, max-age=${HLS_SEGMENT_MAX_AGE_SECONDS}`);
    assert.equal(segment.headers.get('access-control-allow-origin'), '*');

    // Real AAC that decodes: ffprobe names the codec, ffmpeg decodes the whole segment without an error.
    const file = join(service.dataDir, 'segment.ts');
    await writeFile(file, segment.bytes);
    const entries = 'stream=codec_name,sample_rate:format=duration';
    const probe = spawnSync('ffprobe', ['-v', 'error', '-show_entries', entries, '-of', 'json', file], {
      encoding: 'utf8',
    });
    const probed = JSON.parse(probe.stdout);
    assert.equal(probed.streams[0].codec_name, 'aac');
    assert.ok(Number(probed.format.duration) >= 2, `a segment of about 4 s, got ${probed.format.duration}`);
    const decode = spawnSync('ffmpeg', ['-v', 'error', '-i', file, '-f', 'null', '-'], { encoding: 'utf8' });
    assert.equal(decode.status, 0, decode.stderr);
    assert.equal(decode.stderr, '');

    // One place was bought: the HLS session holds it (the segmenter reading the mount does not), so another HLS
    // client and an Icecast listener are both refused.
    const other = await get(hlsUrl);
    const refused = await get(new URL(uris(other.text)[0], hlsUrl).href);
    assert.equal(refused.status, 403);
    const error = JSON.parse(refused.text);
    assert.equal(error.ok, false);
    assert.equal(error.error.code, 'listener_limit_reached');
    assert.equal(error.error.retryable, true);
    assert.match(error.error.message, /bought for 1 listener/);
    assert.equal(await icecastStatus(svc.stream_url), 401);
    // Nor does a listener pass as our segmenter (which takes no place) by borrowing its name without its secret.
    const impostor = {
      'user-agent': 'agent-audio-api-hls-segmenter/1',
      authorization: `Basic ${Buffer.from('hls-segmenter:guess').toString('base64')}`,
    };
    assert.equal(await icecastStatus(svc.stream_url, impostor), 401);
    await impostorRefusedAsSuch(svc.stream_url, impostor);

    // The usage counts the HLS listener (and not the segmenter) and exactly the bytes HLS clients were sent.
    let fetchedAt = 0;
    const usage = await waitFor(
      'the HLS bytes in the usage',
      async () => {
        // A player fetches its playlist every few seconds: the session stays present (within 2 x 4 s).
        if (Date.now() - fetchedAt > 2500) {
          fetchedAt = Date.now();
          assert.equal(await player.poll(), 200);
        }
        const u = (await request(service, 'GET', `/services/${svc.service_id}/usage`)).body.usage;
        return u.bytes.sent_to_listeners === player.bytes && u.listeners.current === 1 && u;
      },
      15_000,
    ).catch(async (e) => {
      const usageNow = (await request(service, 'GET', `/services/${svc.service_id}/usage`)).body.usage;
      throw new Error(`${e.message}; counted ${player.bytes}, usage ${JSON.stringify(usageNow)}`);
    });
    assert.equal(usage.listeners.peak, 1, 'the segmenter is not a listener');
    assert.equal(usage.transfer.used_gb, (player.bytes / 1e9).toString());
    assert.ok(Number(usage.listener_hours) > 0);
    // The owner's statistics hold the HLS session: its protocol and network, never the full address.
    const { current } = (await request(service, 'GET', `/services/${svc.service_id}/listeners`)).body;
    assert.equal(current.length, 1, JSON.stringify(current));
    assert.equal(current[0].protocol, 'hls');
    assert.equal(current[0].client_network, '127.0.0.0/24');

    // ffmpeg plays the session's playlist as a player does (the one place is this session's).
    const played = spawnSync('ffmpeg', ['-v', 'error', '-i', mediaUrl, '-t', '2', '-f', 'null', '-'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(played.status, 0, played.stderr);

    // serve restarts (Icecast with it, on a new port): the same HLS address works again once the source is back,
    // the session's token takes its place again, and the usage saved before the restart stands.
    const before = player.bytes;
    const segmentServer = new URL(segmentUri).origin;
    await service.stop();
    assert.equal(listeningProcess(segmentServer), undefined, 'nginx stopped with serve');
    encoder?.kill('SIGKILL');
    service = await startService(service.env, { dataDir: service.dataDir });
    const again = (await request(service, 'GET', `/services/${svc.service_id}`)).body.service;
    assert.equal(again.endpoints.hls_url, `${service.baseUrl}/hls/${svc.service_id}/index.m3u8`);
    encoder = startFfmpegSource(again.broadcast_url);
    // The old session's address at serve (nginx is on a new port too).
    mediaUrl = `${service.baseUrl}/hls/${svc.service_id}/live.m3u8?session=${token}`;
    const resumed = await waitFor(
      'the HLS playlist after the restart',
      async () => {
        const answer = await get(mediaUrl);
        return answer.status === 200 && answer;
      },
      40_000,
    );
    assert.match(uris(resumed.text)[0], segmentAddress, 'the session signed before the restart plays');
    const after = (await request(service, 'GET', `/services/${svc.service_id}/usage`)).body.usage;
    assert.ok(after.bytes.sent_to_listeners >= before, `${after.bytes.sent_to_listeners} >= ${before}`);
    const newHlsUrl = `${service.baseUrl}/hls/${svc.service_id}/index.m3u8`;
    const another = await get(newHlsUrl);
    assert.equal((await get(new URL(uris(another.text)[0], newHlsUrl).href)).status, 403, 'the place is taken again');

    // nginx answers the session at its own address meanwhile (serve linked it when it answered).
    const atNginx = new URL(uris(another.text)[0]);
    atNginx.searchParams.set('session', token);
    const linked = await fetch(atNginx);
    assert.equal(linked.status, 200);
    assert.equal(linked.headers.get('x-hls-playlist-server'), 'nginx');
    await linked.arrayBuffer();

    // Stopped: the playlist answers 410 with an error document (nginx no longer answers the session: it asks serve),
    // the rendition's files and ffmpeg are gone.
    const stopped = await request(service, 'POST', `/services/${svc.service_id}/stop`, {
      headers: { 'idempotency-key': 'stop-hls-test' },
    });
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    for (const url of [newHlsUrl, mediaUrl]) {
      const gone = await get(url);
      assert.equal(gone.status, 410);
      assert.equal(JSON.parse(gone.text).error.code, 'service_not_active');
    }
    // nginx's link goes once serve learns of the stop (its notification, checked every 250 ms).
    const revoked = await waitFor(
      'nginx to stop answering the session',
      async () => {
        const answer = await get(atNginx.href);
        return answer.status !== 200 && answer;
      },
      1000,
    );
    assert.equal(revoked.status, 410);
    assert.equal(JSON.parse(revoked.text).error.code, 'service_not_active');
    const dir = join(service.dataDir, 'hls', svc.service_id);
    await waitFor('the rendition to be removed', () => !existsSync(dir) && !segmenterRunning(dir), 15_000);
  });
});

/** Whether an ffmpeg writing into `dir` still runs. */
function segmenterRunning(dir: string): boolean {
  const ps = spawnSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
  return ps.stdout.split('\n').some((line) => line.startsWith('ffmpeg') && line.includes(dir));
}
