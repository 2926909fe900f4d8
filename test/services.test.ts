import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { buy } from './support/purchase.js';
import { request, startService, type Service } from './support/service.js';
import { waitFor } from './support/streaming.js';
import { sine, tone } from './support/tones.js';
import { TestWallet } from './support/wallet.js';
import { requireStreamingTools } from './support/system-tools.js';
import { buyerWallet } from './support/dev-file.js';

requireStreamingTools(['ffmpeg', 'ffprobe', 'icecast2']);

let service: Service;
let wallet: TestWallet;
let autodj: any;
let live: any;

before(async () => {
  service = await startService();
  wallet = await buyerWallet(service);
  autodj = (
    await buy(service, wallet, {
      product_id: 'temporary-autodj',
      email: 'dj@example.com',
      station_name: 'Auto FM',
      parameters: { duration_hours: 2, bitrate_kbps: 64, storage_mb: 1, listeners: 3 },
    })
  ).body;
  live = (
    await buy(service, wallet, {
      product_id: 'instant-stream',
      email: 'live@example.com',
      station_name: 'Live FM',
      parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
    })
  ).body;
});
after(async () => {
  await service?.stop();
});

const MP3 = ['-c:a', 'libmp3lame', '-b:a', '64k', '-f', 'mp3'];

const api = (method: string, path: string, options: Parameters<typeof request>[3] = {}) =>
  request(service, method, path, options);

describe('services', () => {
  test('GET /services/{id} for the owner only; 404 for anyone else', async () => {
    const own = await api('GET', `/services/${autodj.service.service_id}`);
    assert.equal(own.status, 200);
    assert.equal(own.body.service.service_id, autodj.service.service_id);
    const other = JSON.parse((await service.cli(['keys', 'create', '--name', 'stranger'])).stdout);
    const stranger = { baseUrl: service.baseUrl, apiKey: other.api_key };
    for (const path of [
      `/services/${autodj.service.service_id}`,
      `/services/${autodj.service.service_id}/usage`,
      `/services/${autodj.service.service_id}/files`,
      `/orders/${autodj.order.id}`,
    ]) {
      const answer = await request(stranger, 'GET', path);
      assert.equal(answer.status, 404, path);
      assert.match(answer.body.error.code, /not_found$/);
    }
  });

  test('usage reports listeners, transfer, source, time and storage', async () => {
    const { status, body } = await api('GET', `/services/${live.service.service_id}/usage`);
    assert.equal(status, 200);
    const u = body.usage;
    assert.equal(u.status, 'active');
    assert.equal(u.transfer.included_gb, '0');
    // What the lifecycle rule does with transfer_gb 0: it never suspends for transfer; the usage says so.
    assert.equal(u.transfer.policy, 'not_limited');
    assert.match(u.transfer.note, /not limited; max_listeners and the bitrate bought bound it/);
    assert.equal(typeof u.listeners.current, 'number');
    assert.ok(u.time.remaining_seconds > 3500 && u.time.remaining_seconds <= 3600);
    assert.equal(u.source.bought_kbps, 64);
    assert.equal(u.storage, undefined, 'instant-stream has no storage');
    const withStorage = (await api('GET', `/services/${autodj.service.service_id}/usage`)).body.usage;
    assert.deepEqual(withStorage.storage, { used_mb: 0, bought_mb: 1 });
  });

  test('uploads are checked, counted against storage_mb while they stream, and never kept partially', async () => {
    const id = autodj.service.service_id;
    const mediaDir = join(service.dataDir, 'media', id);
    const song = await tone(3, 'First Song', MP3);
    const put = (name: string, body: Buffer) =>
      api('PUT', `/services/${id}/files/${encodeURIComponent(name)}`, {
        rawBody: body,
        headers: { 'content-type': 'application/octet-stream' },
      });

    const ok = await put('first.mp3', song);
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    assert.equal(ok.body.file.size_bytes, song.length);
    assert.equal(ok.body.file.title, 'First Song');
    assert.equal(ok.body.file.artist, 'Test Band');

    const notAudio = await put('notes.mp3', Buffer.from('this is not audio at all '.repeat(100)));
    assert.equal(notAudio.status, 422);
    assert.equal(notAudio.body.error.code, 'not_audio');

    const big = await tone(40, 'Too Long', ['-f', 'wav']);
    assert.ok(big.length > 1024 * 1024, 'the WAV is larger than the 1 MB bought');
    const tooBig = await put('big.wav', big);
    assert.equal(tooBig.status, 413);
    assert.equal(tooBig.body.error.code, 'storage_quota_exceeded');

    const listed = await api('GET', `/services/${id}/files`);
    assert.deepEqual(
      listed.body.files.map((f: any) => f.name),
      ['first.mp3'],
    );
    assert.deepEqual((await readdir(mediaDir)).sort(), ['first.mp3'], 'nothing partial is left on disk');

    const bad = await api('PUT', `/services/${id}/playlist`, { body: { playlist: ['first.mp3', 'missing.mp3'] } });
    assert.equal(bad.status, 422);
    assert.equal(bad.body.error.details[0].pointer, '/playlist/1');
    const playlist = await api('PUT', `/services/${id}/playlist`, { body: { playlist: ['first.mp3'], shuffle: true } });
    assert.deepEqual(playlist.body, { ok: true, playlist: ['first.mp3'], shuffle: true });

    assert.equal((await api('DELETE', `/services/${id}/files/first.mp3`)).status, 200);
    assert.equal((await api('DELETE', `/services/${id}/files/first.mp3`)).status, 404);
    assert.deepEqual(await readdir(mediaDir), []);

    const liveUpload = await api('PUT', `/services/${live.service.service_id}/files/x.mp3`, {
      rawBody: song,
      headers: { 'content-type': 'audio/mpeg' },
    });
    assert.equal(liveUpload.status, 409);
    assert.equal(liveUpload.body.error.code, 'storage_not_included');
  });

  test('AutoDJ announces each file: its tags, else its name; the owner sees it and the history', async () => {
    const id = autodj.service.service_id;
    const put = (name: string, body: Buffer) =>
      api('PUT', `/services/${id}/files/${encodeURIComponent(name)}`, {
        rawBody: body,
        headers: { 'content-type': 'application/octet-stream' },
      });
    assert.equal((await put('tagged.mp3', await tone(2, 'Tagged Song', MP3))).status, 201);
    const plain = await sine({ seconds: 2, frequency: 330 }, ['-map_metadata', '-1', '-f', 'wav']);
    assert.equal((await put('plain-tone.wav', plain)).status, 201);
    const playlist = { playlist: ['tagged.mp3', 'plain-tone.wav'], shuffle: false };
    assert.equal((await api('PUT', `/services/${id}/playlist`, { body: playlist })).status, 200);
    const history = await waitFor(
      'both files announced',
      async () => {
        const tracks = (await api('GET', `/services/${id}/now-playing`)).body.history ?? [];
        const titles = tracks.map((t: any) => t.title);
        return titles.includes('Tagged Song') && titles.includes('plain-tone.wav') && tracks;
      },
      60_000,
    );
    const tagged = history.find((t: any) => t.title === 'Tagged Song');
    assert.equal(tagged.artist, 'Test Band');
    assert.equal(tagged.source, 'autodj');
    assert.equal(history.find((t: any) => t.title === 'plain-tone.wav').artist, null);
    const listen = ((await (await fetch(autodj.service.endpoints.now_playing_public)).json()) as any).listen;
    assert.equal(listen.station_name, 'Auto FM');
    assert.ok(['Tagged Song', 'plain-tone.wav'].includes(listen.now_playing.title), listen.now_playing.title);
  });
});
