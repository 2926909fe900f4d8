import assert from 'node:assert/strict';
import { mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { CHROMIUM, launchChromium } from './support/browser.js';
import { request, root, startService, type Service } from './support/service.js';
import { waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { mp3WithCover, picture, tone } from './support/tones.js';
import { boughtService } from './support/live-stream.js';

// Now playing with the cover picture an uploaded track carries: copied out at upload, named in the public JSON while
// AutoDJ plays the track, served as the same bytes, shown by the page in Chromium, and the station's artwork again
// for a track without one.
requireStreamingTools(['icecast2', 'ffmpeg', CHROMIUM]);
const ARTIFACTS = join(root, 'test-artifacts');

let service: Service;
let svc: any;
let browser: Browser | undefined;
let page: Page | undefined;
let cover: Buffer;

const put = (name: string, body: Buffer) =>
  request(service, 'PUT', `/services/${svc.service_id}/files/${encodeURIComponent(name)}`, {
    rawBody: body,
    headers: { 'content-type': 'application/octet-stream' },
  });
const publicGet = (url: string) => fetch(url, { signal: AbortSignal.timeout(30_000) });
const nowPlaying = async () => ((await (await publicGet(svc.endpoints.now_playing_public)).json()) as any).listen;
const playing = (title: string) =>
  waitFor(
    `AutoDJ playing ${title}`,
    async () => {
      const listen = await nowPlaying();
      return listen.now_playing?.title === title && listen;
    },
    90_000,
  );
const mediaDir = () => join(service.dataDir, 'media', svc.service_id);
const pictures = async () => (await readdir(mediaDir())).filter((name) => name.startsWith('.track-art-'));

before(async () => {
  cover = await picture(64);
  service = await startService();
  svc = await boughtService(service, {
    product_id: 'temporary-autodj',
    email: 'dj@example.com',
    station_name: 'Cover FM',
    parameters: { duration_hours: 1, bitrate_kbps: 64, storage_mb: 5, listeners: 3 },
  });
  for (const [name, body] of [
    ['a-covered.mp3', await mp3WithCover(8, 'Covered Song', cover)],
    ['b-plain.mp3', await tone(8, 'Plain Song', ['-c:a', 'libmp3lame', '-b:a', '64k', '-f', 'mp3'])],
  ] as const) {
    const kept = await put(name, body);
    assert.equal(kept.status, 201, JSON.stringify(kept.body));
  }
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await service?.stop();
});

describe('now playing with the track artwork', () => {
  test("the public JSON names the playing track's cover, served as the file's own picture bytes", async () => {
    const listen = await playing('Covered Song');
    const url = listen.now_playing.artwork_url;
    assert.match(url, new RegExp(`^${svc.endpoints.listen_page}/track-artwork/[0-9a-f]{32}\\.png$`));
    assert.equal(listen.artwork_url, null, 'the station has no artwork of its own');
    const image = await publicGet(url);
    assert.equal(image.status, 200);
    assert.equal(image.headers.get('content-type'), 'image/png');
    assert.ok(Buffer.from(await image.arrayBuffer()).equals(cover), 'the bytes embedded in the MP3');
    assert.equal((await pictures()).length, 1);
    const other = await publicGet(url.replace(/[0-9a-f]{32}/, '0'.repeat(32)));
    assert.equal(other.status, 404);
    assert.equal(((await other.json()) as any).error.code, 'artwork_not_found');
  });

  test('the page in Chromium shows the cover while the track plays, then the station artwork', async () => {
    page = await browser!.newPage({ viewport: { width: 900, height: 700 } });
    await page.goto(svc.endpoints.listen_page);
    const art = () =>
      page!.$eval('#art', (img) => {
        const image = img as HTMLImageElement;
        return { src: image.currentSrc, width: image.naturalWidth, done: image.complete };
      });
    const covered = await playing('Covered Song');
    await waitFor('the cover on the page', async () => {
      const shown = await art();
      return shown.src === covered.now_playing.artwork_url && shown.done && shown.width === 64;
    });
    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'listen-track-artwork.png') });
    const plain = await playing('Plain Song');
    assert.equal(plain.now_playing.artwork_url, null);
    await waitFor(
      "the station's artwork again",
      async () => (await art()).src === `${service.baseUrl}/listen/assets/station.png`,
      15_000,
    );
    const html = await (await publicGet(svc.endpoints.listen_page)).text();
    assert.match(html, /<img class="art" id="art" src="[^"]+\/station\.png"/, 'the page as served, without script');
  });

  test('a cover too small is not kept; the picture goes with the last file that carries it', async () => {
    const tiny = await put('c-tiny.mp3', await mp3WithCover(2, 'Tiny Cover', await picture(8)));
    assert.equal(tiny.status, 201, 'the audio is kept without its picture');
    const again = await put('d-same-cover.mp3', await mp3WithCover(2, 'Same Cover', cover));
    assert.equal(again.status, 201);
    assert.equal((await pictures()).length, 1, 'one file for one picture');
    const url = (await nowPlaying()).history.find((t: any) => t.artwork_url)?.artwork_url;
    assert.equal((await request(service, 'DELETE', `/services/${svc.service_id}/files/a-covered.mp3`)).status, 200);
    assert.equal((await pictures()).length, 1, 'still used by d-same-cover.mp3');
    assert.equal((await publicGet(url)).status, 200);
    assert.equal((await request(service, 'DELETE', `/services/${svc.service_id}/files/d-same-cover.mp3`)).status, 200);
    assert.deepEqual(await pictures(), []);
    assert.equal((await publicGet(url)).status, 404);
  });
});
