import assert from 'node:assert/strict';
import { spawnSync, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { chromium, type Browser } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ARGS } from './support/browser.js';
import { request, root, startService, type Service } from './support/service.js';
import { setIcecastTitle } from './support/icecast-title.js';
import { openSse } from './support/sse.js';
import { listenWhenLive, rawListener, startFfmpegSource, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { boughtService } from './support/live-stream.js';

// A bought stream's public side: the listen page in a real browser, its JSON, now playing, listener statistics.
requireStreamingTools(['icecast2', 'ffmpeg', CHROMIUM]);
const ARTIFACTS = join(root, 'test-artifacts');

let service: Service;
let encoder: ChildProcess | undefined;
let svc: any;
let browser: Browser | undefined;
let profile: string | undefined;

const owner = (method: string, path: string, body?: unknown) =>
  request(service, method, `/services/${svc.service_id}${path}`, { body });
const publicGet = (url: string) => fetch(url, { signal: AbortSignal.timeout(30_000) });

before(async () => {
  service = await startService();
  svc = await boughtService(service, {
    product_id: 'instant-stream',
    email: 'owner@example.com',
    station_name: 'Listen <FM>',
    parameters: { duration_hours: 1, max_listeners: 5, bitrate_kbps: 64 },
  });
  encoder = startFfmpegSource(svc.broadcast_url);
  (await listenWhenLive(svc.stream_url, 30_000)).close();
});

after(async () => {
  await browser?.close();
  if (profile) await rm(profile, { recursive: true, force: true });
  encoder?.kill('SIGKILL');
  await service?.stop();
});

describe('listen page', () => {
  test('the service record names its public addresses, under the API base', () => {
    assert.equal(svc.endpoints.listen_page, `${service.baseUrl}/listen/${svc.service_id}`);
    assert.equal(svc.endpoints.listen_embed, `${svc.endpoints.listen_page}/embed`);
    assert.equal(svc.endpoints.now_playing_public, `${svc.endpoints.listen_page}/now-playing`);
  });

  test('the public JSON has the station, the stream and no credentials or owner data', async () => {
    const response = await publicGet(svc.endpoints.now_playing_public);
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('access-control-allow-origin'), '*');
    const text = await response.text();
    const { listen } = JSON.parse(text);
    assert.equal(listen.station_name, 'Listen <FM>');
    assert.equal(listen.stream_url, svc.stream_url);
    assert.equal(listen.hls_url, svc.endpoints.hls_url);
    assert.match(listen.hls_url, /\/hls\/[\w-]+\/index\.m3u8$/);
    assert.equal(listen.status, 'active');
    assert.equal(listen.show_time_left, false, 'the time left is shown only when the owner chooses to');
    assert.equal(listen.remaining_seconds, null);
    const password = new URL(svc.broadcast_url.replace(/^icecast:/, 'http:')).password;
    for (const secret of [password, 'owner@example.com', 'broadcast', service.apiKey]) {
      assert.ok(!text.includes(secret), `leaks ${secret}`);
    }
  });

  test('the page and its embed are HTML with a policy; the embed may be framed anywhere; oEmbed', async () => {
    const page = await publicGet(svc.endpoints.listen_page);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type')!, /^text\/html/);
    assert.match(page.headers.get('content-security-policy')!, /frame-ancestors 'self'/);
    const html = await page.text();
    assert.match(html, /<h1 id="station">Listen &#60;FM&#62;<\/h1>/);
    const embed = await publicGet(svc.endpoints.listen_embed);
    assert.equal(embed.status, 200);
    assert.match(embed.headers.get('content-security-policy')!, /frame-ancestors \*/);
    assert.equal(embed.headers.get('x-frame-options'), null);
    const pageUrl = encodeURIComponent(svc.endpoints.listen_page);
    const oembed = await publicGet(`${service.baseUrl}/listen/oembed?url=${pageUrl}&format=json`);
    assert.equal(oembed.status, 200);
    const described = (await oembed.json()) as any;
    assert.equal(described.type, 'rich');
    assert.match(described.html, new RegExp(`<iframe src="${svc.endpoints.listen_embed}"`));
    const script = await publicGet(`${service.baseUrl}/listen/assets/hls.light.min.js`);
    assert.equal(script.status, 200);
    assert.ok((await script.arrayBuffer()).byteLength > 100_000, 'hls.js is served from node_modules');
  });

  test('an unknown service gets a clear 404 page and a 404 error document', async () => {
    for (const id of ['svc_doesnotexistatall000', 'x', '..%2F..%2Fetc']) {
      const page = await publicGet(`${service.baseUrl}/listen/${id}`);
      assert.equal(page.status, 404, id);
      const html = await page.text();
      assert.match(html, /<h1>No such stream<\/h1>/);
      assert.doesNotMatch(html, /at .*\.ts|Error:/);
    }
    const json = await publicGet(`${service.baseUrl}/listen/svc_doesnotexistatall000/now-playing`);
    assert.equal(json.status, 404);
    const body = (await json.json()) as any;
    assert.equal(body.ok, false);
    assert.equal(body.error.code, 'stream_not_found');
    const elsewhere = encodeURIComponent('https://elsewhere.example/listen/svc_x');
    const oembed = await publicGet(`${service.baseUrl}/listen/oembed?url=${elsewhere}`);
    assert.equal(oembed.status, 404);
  });

  test('the owner sets what plays; history, public JSON and track.changed follow; bad input is refused', async () => {
    const events = `${service.baseUrl}/services/${svc.service_id}/events`;
    const sse = await openSse(events, { authorization: `Bearer ${service.apiKey}` });
    try {
      const set = await owner('PUT', '/now-playing', { title: 'First Song', artist: 'Ann' });
      assert.equal(set.status, 200, JSON.stringify(set.body));
      assert.equal(set.body.now_playing.title, 'First Song');
      assert.equal(set.body.now_playing.source, 'owner');
      await owner('PUT', '/now-playing', { title: 'Second Song' });
      const got = await owner('GET', '/now-playing');
      assert.deepEqual(got.body.history.map((t: any) => t.title).slice(0, 2), ['Second Song', 'First Song']);
      // Stats read just before the second title was set still name the first: an echo of ours, not a live change.
      await setIcecastTitle(service, new URL(svc.stream_url).pathname, 'Ann - First Song');
      await new Promise((resolve) => setTimeout(resolve, 3000));
      const after = await owner('GET', '/now-playing');
      assert.deepEqual(after.body.history.map((t: any) => t.title).slice(0, 2), ['Second Song', 'First Song']);
      assert.equal(got.body.now_playing.artist, null);
      const event = await waitFor(
        'track.changed',
        () =>
          sse.messages
            .map((m) => JSON.parse(m.data))
            .find((e) => e.type === 'track.changed' && e.data.title === 'Second Song'),
        15_000,
      );
      assert.equal(event.data.previous, 'Ann - First Song');
      const listen = ((await (await publicGet(svc.endpoints.now_playing_public)).json()) as any).listen;
      assert.equal(listen.now_playing.title, 'Second Song');
      assert.equal(listen.now_playing.source, undefined);
      const bad = await owner('PUT', '/now-playing', { title: '' });
      assert.equal(bad.status, 422, JSON.stringify(bad.body));
      assert.equal(bad.body.ok, false);
      const stranger = await request(
        { ...service, apiKey: 'sk_nobody' },
        'GET',
        `/services/${svc.service_id}/now-playing`,
      );
      assert.equal(stranger.status, 401);
    } finally {
      sse.close();
    }
  });

  test('a title the live encoder sends (Icecast metadata update) becomes what plays now', async () => {
    // As encoders (BUTT, Mixxx, ffmpeg scripts) send it: /admin/metadata with the service's own source credentials.
    const broadcast = new URL(svc.broadcast_url.replace(/^icecast:/, 'http:'));
    const basic = (pass: string) => `Basic ${Buffer.from(`${broadcast.username}:${pass}`).toString('base64')}`;
    const { origin, pathname } = new URL(svc.stream_url);
    const song = 'Live Band - Live Song';
    const url = `${origin}/admin/metadata?${new URLSearchParams({ mount: pathname, mode: 'updinfo', song })}`;
    const wrong = await fetch(url.replace('Live+Song', 'Other'), { headers: { authorization: basic('wrong') } });
    assert.equal(wrong.status, 401, 'another password cannot set the title');
    const sent = await fetch(url, { headers: { authorization: basic(decodeURIComponent(broadcast.password)) } });
    assert.equal(sent.status, 200, await sent.text());
    const playing = await waitFor(
      'the live title',
      async () => {
        const now = (await owner('GET', '/now-playing')).body.now_playing;
        return now?.title === 'Live Song' && now;
      },
      20_000,
    ).catch((error: Error) => {
      const warnings = service
        .output()
        .split('\n')
        .filter((line) => /"level":"(warn|error)"/.test(line));
      throw new Error(`${error.message}; the service's warnings:\n${warnings.slice(-20).join('\n')}`);
    });
    assert.equal(playing.artist, 'Live Band');
    assert.equal(playing.source, 'live');
  });

  test('listener sessions carry the bytes each client read, within 2 %, and aggregates reach usage', async () => {
    const port = Number(new URL(svc.stream_url).port);
    const path = new URL(svc.stream_url).pathname;
    const agents = ['stats-client-a', 'stats-client-b'];
    const clients = await Promise.all(agents.map((agent) => rawListener(port, path, agent)));
    // Past Icecast's burst on connect (64 KB): then a few seconds of the 64 kbps stream.
    await waitFor('both listeners to receive audio', () => clients.every((c) => c.received() > 100_000), 30_000);
    const current = (await owner('GET', '/listeners')).body.current.filter((s: any) =>
      s.user_agent.startsWith('stats-client'),
    );
    assert.equal(current.length, 2);
    assert.equal(current[0].client_network, '127.0.0.0/24');
    assert.equal(current[0].protocol, 'icecast');
    const read = clients.map((c) => c.close());
    const recent = await waitFor(
      'both sessions with their bytes',
      async () => {
        const page = (await owner('GET', '/listeners?limit=50')).body;
        const done = page.recent.filter((s: any) => s.user_agent.startsWith('stats-client') && s.bytes !== null);
        return done.length === 2 && done;
      },
      30_000,
    );
    // As for usage (metering-service.test): Icecast counts what it wrote, which includes what was still in the
    // sockets' buffers when the client closed, up to about a second of the stream.
    const inFlight = 64_000 / 8;
    const recorded = recent.map((r: any) => `${r.user_agent} ${r.bytes}`).join(', ');
    console.log(`listener sessions: read ${read.join(', ')} bytes; recorded ${recorded}`);
    for (const [i, agent] of agents.entries()) {
      const session = recent.find((s: any) => s.user_agent === agent);
      assert.ok(
        session.bytes >= read[i] * 0.98 && session.bytes <= read[i] * 1.02 + inFlight,
        `${agent}: ${session.bytes} bytes recorded, ${read[i]} read (2 % + ${inFlight} bytes in flight)`,
      );
      assert.ok(session.ended_at, 'ended');
    }
    const paged = (await owner('GET', '/listeners?limit=1')).body;
    assert.equal(paged.recent.length, 1);
    assert.ok(paged.next_cursor);
    const next = (await owner('GET', `/listeners?limit=1&cursor=${paged.next_cursor}`)).body;
    assert.notEqual(next.recent[0].session_id, paged.recent[0].session_id);
    assert.equal((await owner('GET', '/listeners?limit=0')).status, 400);
    const usage = (await owner('GET', '/usage')).body.usage;
    assert.ok(usage.listener_sessions.sessions >= 2);
    assert.equal(usage.listener_sessions.listener_hours_by_hour.length, 24);
    assert.ok(usage.listener_sessions.listener_hours_by_hour.some((h: string) => Number(h) > 0));
  });

  test('in Chromium the page plays the stream and shows the new track when it changes', async () => {
    profile = await mkdtemp(join(tmpdir(), 'listen-chromium-'));
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', ...CHROMIUM_ARGS],
    });
    browser = context.browser() ?? undefined;
    try {
      const page = await context.newPage();
      await page.goto(svc.endpoints.listen_page);
      const clickedAt = performance.now();
      await page.click('#play');
      const currentTime = () => page.evaluate(() => document.querySelector<HTMLAudioElement>('#player')!.currentTime);
      await waitFor('first sound', async () => (await currentTime()) > 0, 30_000);
      console.log(
        `listen page: first sound ${Math.round(performance.now() - clickedAt)} ms after the click (loopback, HLS)`,
      );
      const startedAt = await waitFor(
        'the audio to play',
        async () => {
          const t = await currentTime();
          return t > 0.5 && t;
        },
        30_000,
      );
      await waitFor('currentTime to advance', async () => (await currentTime()) > startedAt + 1, 30_000);
      assert.equal(await page.evaluate(() => document.body.dataset.protocol), 'hls');
      const title = 'Browser Test Song';
      assert.notEqual(await page.textContent('#title'), title);
      assert.equal((await owner('PUT', '/now-playing', { title, artist: 'Chromium' })).status, 200);
      await waitFor('the page to show the new track', async () => (await page.textContent('#title')) === title, 30_000);
      assert.equal(await page.textContent('#artist'), 'Chromium');
      const recentTracks = async () => (await page.textContent('#history'))!;
      const shown = 'Live Band \u2013 Live Song';
      await waitFor('the recent tracks to follow', async () => (await recentTracks()).includes(shown), 30_000);
      assert.equal(await page.locator('#time-left').isVisible(), false, 'hidden until the owner shows it');
      const timeShown = await owner('PUT', '/profile', { show_time_left: true });
      assert.equal(timeShown.status, 200, JSON.stringify(timeShown.body));
      await waitFor('the time left', async () => /left$/.test((await page.textContent('#time-left'))!), 30_000);
      assert.ok(await page.locator('#time-left').isVisible());
      await mkdir(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, 'listen-page.png') });
    } finally {
      await context.close();
    }
  });

  test('a stopped service: its page says it has ended (410), and its JSON too', async () => {
    const stopped = await owner('POST', '/stop');
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    const page = await publicGet(svc.endpoints.listen_page);
    assert.equal(page.status, 410);
    assert.match(await page.text(), /This stream was stopped by its owner/);
    const json = await publicGet(svc.endpoints.now_playing_public);
    assert.equal(json.status, 410);
    assert.equal(((await json.json()) as any).error.code, 'stream_ended');
  });
});
