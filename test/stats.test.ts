import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { mediaUrlOf, segmentLines } from './support/hls-player.js';
import { buyInstantStream } from './support/live-stream.js';
import { request, startService, type Service } from './support/service.js';
import { rawListener, startFfmpegSource, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';

// Listener statistics against clients of known duration, devices and addresses: Icecast readers on raw sockets and
// HLS players behind a trusted proxy (X-Forwarded-For), each with its own user agent. The listening hours of the
// statistics, the sessions' aggregates and the usage are one figure, within 2 % of what the clients listened.
requireStreamingTools(['icecast2', 'ffmpeg']);

const AGENTS = {
  iphone:
    'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1',
  windows:
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36',
  vlc: 'VLC/3.0.20 LibVLC/3.0.20',
  android:
    'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36',
  ipad: 'Mozilla/5.0 (iPad; CPU OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1',
};
const SEGMENT_SECONDS = 4;

let service: Service;
let encoder: ChildProcess | undefined;
before(async () => {
  service = await startService({ TRUSTED_PROXIES: '127.0.0.1' });
});
after(async () => {
  encoder?.kill('SIGKILL');
  await service?.stop();
});

let lastRefusal = '';
/**
 * An HLS player at a given address and user agent, playing `seconds` from its first answered playlist. Resolves to
 * the seconds it held its place: from its first request (answers wait while the rendition starts) until its last
 * segment has played (a segment after its last playlist).
 */
async function hlsListener(
  masterUrl: string,
  agent: string,
  address: string,
  seconds: number,
  playing = () => {},
): Promise<number> {
  const headers = { 'user-agent': agent, 'x-forwarded-for': address };
  const master = await (await fetch(masterUrl, { headers })).text();
  const media = mediaUrlOf(master, masterUrl);
  let first: number | undefined;
  let last = 0;
  const asked = performance.now();
  const seen = new Set<string>();
  while (first === undefined || performance.now() - first < seconds * 1000) {
    const answer = await fetch(media, { headers });
    const text = await answer.text();
    if (answer.status === 200) {
      last = performance.now();
      if (first === undefined) playing();
      first ??= last;
      for (const uri of segmentLines(text).filter((u) => !seen.has(u))) {
        seen.add(uri);
        await (await fetch(new URL(uri, media), { headers })).arrayBuffer();
      }
    } else {
      assert.equal(first, undefined, `the playlist answered ${answer.status} after its first 200: ${text}`);
      lastRefusal = `${answer.status} ${text.slice(0, 300)}`;
    }
    await sleep(1500);
  }
  return (last - asked) / 1000 + SEGMENT_SECONDS;
}

/** An Icecast listener reading the stream on a raw socket for `seconds`; resolves to the seconds it was connected. */
async function icecastListener(streamUrl: string, agent: string, seconds: number): Promise<number> {
  const url = new URL(streamUrl);
  const began = performance.now();
  const listener = await rawListener(Number(url.port), url.pathname, agent);
  await waitFor('the stream answered', async () => listener.status() === 200 || undefined, 20_000).catch((e) => {
    const warnings = service
      .output()
      .split('\n')
      .filter((line) => /"level":"(warn|error)"/.test(line));
    throw new Error(`${e.message} (${agent}: ${listener.status()}); warnings:\n${warnings.slice(-10).join('\n')}`);
  });
  await sleep(seconds * 1000);
  listener.close();
  return (performance.now() - began) / 1000;
}

const near = (actual: number, expected: number, what: string) =>
  assert.ok(Math.abs(actual - expected) <= expected * 0.02, `${what}: ${actual} is not within 2 % of ${expected}`);
const keys = (list: { key: string; unique_listeners: number }[]) =>
  Object.fromEntries(list.map((b) => [b.key, b.unique_listeners]));

describe('listener statistics', () => {
  test('per day: listeners, hours, peak, devices, platforms, countries, tracks; the same hours in usage', async () => {
    const svc = await buyInstantStream(service, 'Stats FM', { duration_hours: 1, max_listeners: 8, bitrate_kbps: 64 });
    const id = svc.service_id;
    encoder = startFfmpegSource(svc.broadcast_url);
    const set = await request(service, 'PUT', `/services/${id}/now-playing`, {
      body: { title: 'Counted Song', artist: 'The Figures' },
    });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    const onAir = async () => (await request(service, 'GET', `/listen/${id}/now-playing`)).body.listen?.on_air;
    await waitFor('the source on air', onAir, 40_000);
    // The rendition is started by a first player, which then listens on (its place taken from its first request).
    const hlsUrl = svc.endpoints.hls_url;
    let started = false;
    const australia = hlsListener(hlsUrl, AGENTS.android, '1.0.0.5', 36, () => {
      started = true;
    });
    await waitFor('the HLS rendition', () => started, 60_000).catch((e: Error) => {
      const warnings = service
        .output()
        .split('\n')
        .filter((line) => /"level":"(warn|error)"/.test(line));
      throw new Error(`${e.message}: ${lastRefusal}\n${warnings.slice(-5).join('\n').slice(0, 3000)}`);
    });
    const listened = await Promise.all([
      australia,
      hlsListener(hlsUrl, AGENTS.ipad, '81.2.69.142', 30),
      icecastListener(svc.stream_url, AGENTS.iphone, 30),
      icecastListener(svc.stream_url, AGENTS.windows, 40),
      icecastListener(svc.stream_url, AGENTS.vlc, 24),
    ]);
    const known = listened.reduce((a, b) => a + b, 0);

    // Every session closed with its time: Icecast's access log lines attributed, the HLS players ended as idle.
    const today = new Date().toISOString().slice(0, 10);
    const path = `/services/${id}/stats?from=${today}&to=${today}&group=day`;
    const stats = await waitFor(
      'every session closed',
      async () => {
        const page = (await request(service, 'GET', `/services/${id}/listeners?limit=50`)).body;
        const closed = page.current.length === 0 && page.recent.every((s: any) => s.protocol === 'hls' || s.bytes);
        return closed ? (await request(service, 'GET', path)).body.stats : undefined;
      },
      60_000,
    );
    const day = stats.days[0];
    assert.equal(stats.days.length, 1);
    assert.equal(day.date, today);
    assert.equal(day.unique_listeners, 5, JSON.stringify(day));
    assert.equal(day.peak_listeners, 5, JSON.stringify(day));
    assert.ok(Date.parse(day.peak_at) > Date.now() - 5 * 60_000);
    const sessions = (await request(service, 'GET', `/services/${id}/listeners?limit=50`)).body.recent;
    const told = sessions.map((s: any) => `${s.protocol} ${s.user_agent.slice(0, 14)} ${s.duration_seconds}`);
    near(Number(day.listening_hours) * 3600, known, `the statistics against the clients (${listened}; ${told})`);
    near(day.average_listening_seconds, known / 5, 'the average listening time');
    assert.deepEqual(keys(day.by_protocol), { icecast: 3, hls: 2 });
    assert.deepEqual(keys(day.by_device_class), { mobile: 2, tablet: 1, desktop: 1, other: 1 });
    assert.deepEqual(keys(day.by_platform), { iOS: 2, Android: 1, Windows: 1, unknown: 1 });
    assert.deepEqual(keys(day.by_country), { unknown: 3, AU: 1, GB: 1 }, 'loopback has no country');
    assert.deepEqual(day.top_tracks[0], { title: 'Counted Song', artist: 'The Figures', listeners: 5 });
    assert.deepEqual(stats.totals.unique_listeners, 5);
    assert.equal(stats.totals.listening_hours, day.listening_hours);

    // The usage (measured at the life-cycle passes) and the sessions' aggregates say the same hours.
    const usage = await waitFor(
      'the usage with every session',
      async () => {
        const u = (await request(service, 'GET', `/services/${id}/usage`)).body.usage;
        return Math.abs(Number(u.listener_hours) * 3600 - known) <= known * 0.02 ? u : undefined;
      },
      30_000,
    ).catch(async (e: Error) => {
      const u = (await request(service, 'GET', `/services/${id}/usage`)).body.usage;
      throw new Error(`${e.message}: usage ${u.listener_hours} h, clients ${known / 3600} h`);
    });
    console.log(
      `listening: clients ${known.toFixed(1)} s, statistics ${Number(day.listening_hours) * 3600} s, ` +
        `usage ${Number(usage.listener_hours) * 3600} s`,
    );
    near(Number(usage.listener_hours), Number(day.listening_hours), 'the usage against the statistics');
    const byHour = usage.listener_sessions.listener_hours_by_hour.reduce((a: number, h: string) => a + Number(h), 0);
    near(byHour, Number(day.listening_hours), "the sessions' aggregates against the statistics");
    assert.equal(usage.stats_url, `${service.baseUrl}/services/${id}/stats`);

    // The CSV: one total row per day with the JSON's figures, then the breakdowns.
    const csv = await fetch(`${service.baseUrl}${path.replace('/stats?', '/stats.csv?')}`, {
      headers: { authorization: `Bearer ${service.apiKey}` },
    });
    assert.equal(csv.status, 200);
    assert.match(csv.headers.get('content-type') ?? '', /^text\/csv/);
    const lines = (await csv.text()).trimEnd().split('\r\n');
    assert.equal(
      lines[0],
      'date,dimension,key,unique_listeners,sessions,listening_hours,average_listening_seconds,peak_listeners,peak_at',
    );
    assert.equal(
      lines[1],
      [today, 'total', '', 5, day.sessions, day.listening_hours, day.average_listening_seconds, 5, day.peak_at].join(
        ',',
      ),
    );
    assert.ok(
      lines.includes(`${today},country,AU,1,,${day.by_country.find((c: any) => c.key === 'AU').listening_hours},,,`),
    );
    assert.ok(lines.includes(`${today},track,The Figures - Counted Song,5,,,,,`));
  });

  test('bad ranges are refused with an error document; another key sees no statistics', async () => {
    const svc = (await request(service, 'GET', '/services')).body.services[0];
    for (const query of [
      'from=2026-02-30',
      'from=2026-03-02&to=2026-03-01',
      'group=hour',
      'from=2025-01-01&to=2026-01-01',
      'format=xml',
    ]) {
      const answer = await request(service, 'GET', `/services/${svc.service_id}/stats?${query}`);
      assert.equal(answer.status, 400, query);
      assert.equal(answer.body.error.code, 'invalid_stats_query');
    }
    const stranger = await request(service, 'GET', `/services/${svc.service_id}/stats`, {
      headers: { authorization: 'Bearer not-a-key' },
    });
    assert.equal(stranger.status, 401);
  });
});
