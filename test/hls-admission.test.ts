import assert from 'node:assert/strict';
import { spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { HLS_SEGMENT_MAX_AGE_SECONDS } from '../src/hls/url.js';
import { HlsPlayer, listeningProcess, mediaUrlOf, segmentLines } from './support/hls-player.js';
import { buyInstantStream } from './support/live-stream.js';
import { request, startService, type Service } from './support/service.js';
import { connectListener, listenWhenLive, startFfmpegSource, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { PLAYLIST_BURST, SHARED_AFTER_REFUSALS } from '../src/hls/session-pace.js';

// HLS admission as an attacker tries it: places are taken only by the media playlist of a session we issued, at one
// player's pace; HEAD and the multivariant playlist take none and start no encoder; segments have one address for
// every listener, which any cache may keep.
requireStreamingTools(['icecast2', 'ffmpeg']);
/**
 * A session that fetched nothing keeps its place 4 s here (HLS_PRESENCE_SECONDS) rather than twice a segment (8 s):
 * still twice the 2 s players here reload at, and the waits for places to be freed are half as long.
 */
const PRESENCE_SECONDS = 4;
/** The wait for an idle session's place to be freed: shorter than the default 8 s, so a service ignoring it fails. */
const FREED_MS = 7_500;

let service: Service;
let encoder: ChildProcess | undefined;
let svc: any;
let dir: string;

before(async () => {
  service = await startService({ HLS_PRESENCE_SECONDS: String(PRESENCE_SECONDS) });
  svc = await buyInstantStream(service, 'Guarded FM', { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 });
  dir = join(service.dataDir, 'hls', svc.service_id);
  encoder = startFfmpegSource(svc.broadcast_url);
  (await listenWhenLive(svc.stream_url, 40_000)).close();
});
after(async () => {
  encoder?.kill('SIGKILL');
  await service?.stop();
});

async function master(): Promise<string> {
  const answer = await fetch(svc.endpoints.hls_url);
  assert.equal(answer.status, 200);
  return mediaUrlOf(await answer.text(), svc.endpoints.hls_url);
}

async function usage() {
  return (await request(service, 'GET', `/services/${svc.service_id}/usage`)).body.usage;
}

/** The listeners holding a place now, as the owner's statistics show them (read from the database). */
async function holders(): Promise<number> {
  return (await request(service, 'GET', `/services/${svc.service_id}/listeners`)).body.current.length;
}

/** An Icecast listener's status on the stream (it closes at once). */
async function icecastListener(): Promise<number> {
  const listener = await connectListener(svc.stream_url);
  listener.close();
  return listener.status;
}

describe('HLS admission', () => {
  test('HEAD and the multivariant playlist take no place and start no encoder', async () => {
    const media: string[] = [];
    for (let i = 0; i < 30; i++) {
      assert.equal((await fetch(svc.endpoints.hls_url, { method: 'HEAD' })).status, 200);
      media.push(await master());
    }
    for (const url of media) {
      const head = await fetch(url, { method: 'HEAD' });
      assert.equal(head.status, 200);
      assert.equal(head.headers.get('cache-control'), 'no-store');
    }
    assert.equal(new Set(media).size, 30, 'each multivariant playlist names a session of its own');
    assert.equal(await holders(), 0);
    assert.equal(await icecastListener(), 200, 'an Icecast listener still finds a place');
    await sleep(1000);
    assert.equal(existsSync(dir), false, 'no rendition was started');
    assert.equal(segmenterRunning(dir), false);
  });

  test('a made-up or forged session is refused and starts nothing', async () => {
    const media = new URL(await master());
    const genuine = media.searchParams.get('session')!;
    // At nginx's address (where players fetch it) and at serve's.
    const bases = [
      `${media.origin}${media.pathname}?session=`,
      `${service.baseUrl}/hls/${svc.service_id}/live.m3u8?session=`,
    ];
    const forged = genuine.slice(0, 22) + randomBytes(12).toString('base64url');
    const other = randomBytes(16).toString('base64url') + genuine.slice(22);
    for (const token of [randomBytes(16).toString('base64url'), forged, other, '']) {
      for (const [method, base] of bases.flatMap((b) => [['GET', b] as const, ['HEAD', b] as const])) {
        const answer = await fetch(base + token, { method });
        assert.equal(answer.status, 400, `${method} ${token}`);
        assert.equal(answer.headers.get('cache-control'), 'no-store');
        if (method === 'GET') assert.equal(JSON.parse(await answer.text()).error.code, 'hls_session_invalid');
      }
    }
    // A token issued for another service is refused too (it is signed with the service it was issued for).
    const elsewhere = `${service.baseUrl}/hls/svc_not_this_one_at_all/live.m3u8?session=${genuine}`;
    assert.notEqual((await fetch(elsewhere)).status, 200);
    assert.equal(await holders(), 0);
    assert.equal(existsSync(dir), false, 'no rendition was started');
  });

  test('a session shared by 30 players is answered at one player pace, then ends', async () => {
    const url = await master();
    const first = new HlsPlayer(url);
    await waitFor('the first playlist', async () => (await first.poll()) === 200, 40_000);
    // 30 players share the session for 24 s, each reloading every 2 s as players do.
    const players = Array.from({ length: 30 }, () => new HlsPlayer(url));
    const began = Date.now();
    await Promise.all(
      players.map(async (p, i) => {
        await sleep((i / 30) * 2000);
        while (Date.now() - began < 24_000) {
          await p.poll();
          await sleep(2000);
        }
      }),
    );
    const seconds = (Date.now() - began) / 1000;
    const answered = players.reduce((n, p) => n + p.answered, 0);
    const refused = players.flatMap((p) => p.refusals);
    const segments = players.reduce((n, p) => n + p.segments.size, 0);
    const oneListener = Math.ceil(seconds / 4) + 3;
    console.log(
      `a session shared by 30 players for ${seconds} s: ${answered} playlists answered, ${refused.length} refused,`,
    );
    console.log(`${segments} segments fetched by them together (one player: ${oneListener})`);
    // A few answers at a player's pace, a few refusals to wait, then the session ends for good.
    assert.ok(answered <= PLAYLIST_BURST + SHARED_AFTER_REFUSALS, `${answered} playlists answered in ${seconds} s`);
    const busy = refused.filter((r) => r.status === 429);
    for (const r of busy) assert.deepEqual(r, { status: 429, code: 'hls_session_busy', retryable: true });
    assert.ok(busy.length < SHARED_AFTER_REFUSALS, `${busy.length} told to wait`);
    const ended = refused.filter((r) => r.status !== 429);
    assert.ok(ended.length > 30 * 8, `${ended.length} refused as shared`);
    for (const r of ended) assert.deepEqual(r, { status: 403, code: 'hls_session_shared', retryable: false });
    assert.ok(segments <= oneListener, `${segments} segments for the 30 together`);
    // Its place was freed when it ended; an Icecast listener and a player of its own get one.
    assert.equal(await holders(), 0);
    assert.equal((await usage()).listeners.peak, 1);
    const own = new HlsPlayer(await master());
    assert.equal(await own.poll(), 200);
    await waitFor('its place to show', async () => (await holders()) === 1, 5_000);
    await waitFor('the place to be freed', async () => (await holders()) === 0, FREED_MS);
  });

  test("after its first, a session's playlists are nginx's; its place is held while it fetches and no longer", async () => {
    const url = await master();
    assert.match(url, new RegExp(`^http://127\\.0\\.0\\.1:\\d+/hls/${svc.service_id}/live\\.m3u8\\?session=`));
    assert.equal(listeningProcess(url), 'nginx');
    const before = (await usage()).bytes.sent_to_listeners;
    const player = new HlsPlayer(url);
    const servedBy: string[] = [];
    // Six reloads 2 s apart (12 s, beyond the 4 s a silent session keeps its place): nginx answers all but the first,
    // which serve admits; the place stays while nginx's log shows the session fetching.
    for (let i = 0; i < 6; i++) {
      assert.equal(await player.poll(), 200);
      servedBy.push(player.servedBy!);
      await sleep(2000);
      assert.equal(await holders(), 1, `the place held after fetch ${i + 1}`);
    }
    assert.deepEqual(servedBy, ['serve', 'nginx', 'nginx', 'nginx', 'nginx', 'nginx']);
    // Its usage, counted from nginx's log: its playlists and the segments they gave it, to the byte.
    await waitFor(
      'its bytes in the usage',
      async () => (await usage()).bytes.sent_to_listeners - before === player.bytes,
      10_000,
    ).catch(async (e) => {
      throw new Error(
        `${e.message}: ${(await usage()).bytes.sent_to_listeners - before} counted, ${player.bytes} sent`,
      );
    });
    // It stops fetching: its place is freed, and nginx no longer answers its address. Two other players take the two
    // places; the ended session's address is then refused (by serve, which nginx asks again).
    await waitFor('the place to be freed', async () => (await holders()) === 0, 15_000);
    const others = [new HlsPlayer(await master()), new HlsPlayer(await master())];
    for (const other of others) assert.equal(await other.poll(), 200);
    const again = await fetch(url);
    assert.equal(again.status, 403);
    assert.equal(again.headers.get('x-hls-playlist-server'), null, 'not answered from a link');
    assert.equal(JSON.parse(await again.text()).error.code, 'listener_limit_reached');
    await waitFor('their places to be freed', async () => (await holders()) === 0, 15_000);
  });

  test('segments: one address for every listener, kept by caches; playlists kept by none', async () => {
    const [a, b] = [new HlsPlayer(await master()), new HlsPlayer(await master())];
    const pa = await fetch(a.mediaUrl);
    const pb = await fetch(b.mediaUrl);
    assert.equal(pb.status, 200);
    assert.equal(pa.headers.get('cache-control'), 'no-store');
    const [la, lb] = [segmentLines(await pa.text()), segmentLines(await pb.text())];
    assert.ok(la.length >= 1);
    // The live window may move on between the two fetches: segments of the same number have the same address.
    const bySequence = (lines: string[]) => new Map(lines.map((uri) => [uri.match(/seg(\d+)-/)?.[1], uri]));
    const [ma, mb] = [bySequence(la), bySequence(lb)];
    const common = [...ma.keys()].filter((n) => n !== undefined && mb.has(n));
    assert.ok(common.length >= 1, `the two playlists share segments (${la} / ${lb})`);
    for (const n of common) assert.equal(ma.get(n), mb.get(n), `segment ${n}: one address for both sessions`);
    for (const uri of la) assert.doesNotMatch(uri, /session|\?/);
    // Served by nginx, not serve: the socket's owner, and a header only nginx's configuration sets.
    const segmentUrl = new URL(la.at(-1)!, a.mediaUrl);
    assert.equal(listeningProcess(segmentUrl.href), 'nginx');
    const segment = await fetch(segmentUrl);
    assert.equal(segment.status, 200);
    assert.equal(segment.headers.get('x-hls-segment-server'), 'nginx');
    assert.equal(segment.headers.get('cache-control'), `public, max-age=${HLS_SEGMENT_MAX_AGE_SECONDS}`);
    await segment.arrayBuffer();
    // Its number alone (or with a wrong tag) reaches nothing: a segment is found only through a playlist.
    const n = /seg(\d+)-[^/]*$/.exec(la.at(-1)!)![1];
    for (const name of [`seg${n}.ts`, `seg${n}-${'A'.repeat(12)}.ts`]) {
      const guessed = await fetch(new URL(name, segmentUrl));
      assert.equal(guessed.status, 404, name);
      assert.equal(guessed.headers.get('cache-control'), 'no-store');
      await guessed.arrayBuffer();
    }
    // A full stream refuses a third session at its playlist; the two sessions each hold a place.
    const third = await fetch(await master());
    assert.equal(third.status, 403);
    assert.equal(JSON.parse(await third.text()).error.code, 'listener_limit_reached');
    await waitFor('both places to show', async () => (await holders()) === 2, 5_000);
  });
});

/** Whether an ffmpeg writing into `dir` runs. */
function segmenterRunning(dir: string): boolean {
  const ps = spawnSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
  return ps.stdout.split('\n').some((line) => line.startsWith('ffmpeg') && line.includes(dir));
}
