import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContextOptions, Page } from 'playwright-core';
import { CHROMIUM, launchChromium } from './support/browser.js';
import { request, root, scratchDir, startService, type Service } from './support/service.js';
import { listenWhenLive, startFfmpegSource, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { stillImage } from './support/tones.js';
import { boughtService } from './support/live-stream.js';

// The listen page as an owner would post it: the station's profile and artwork, link previews, the favicon, the page
// without script, accessibility (axe-core in Chromium), both colour schemes, and the embed inside another site.
requireStreamingTools(['icecast2', 'ffmpeg', CHROMIUM]);
const ARTIFACTS = join(root, 'test-artifacts');
const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

let service: Service;
let encoder: ChildProcess | undefined;
let svc: any;
let browser: Browser | undefined;
let images: string;
let foreign: Server | undefined;

const owner = (method: string, path: string, options: { body?: unknown; raw?: Buffer; type?: string } = {}) =>
  request(service, method, `/services/${svc.service_id}${path}`, {
    body: options.body,
    rawBody: options.raw,
    headers: options.type ? { 'content-type': options.type } : undefined,
  });
const publicGet = (url: string) => fetch(url, { signal: AbortSignal.timeout(30_000) });
const publicState = async () => ((await (await publicGet(svc.endpoints.now_playing_public)).json()) as any).listen;

/** Real images from a real encoder (ffmpeg): a fractal as artwork, and the ones the checks refuse. */
async function makeImages(dir: string): Promise<void> {
  const images: Record<string, Promise<Buffer>> = {
    'art.png': stillImage('mandelbrot=s=512x512'),
    'art.jpg': stillImage('mandelbrot=s=300x200', ['-c:v', 'mjpeg', '-f', 'image2pipe']),
    'art.webp': stillImage('mandelbrot=s=256x256', ['-c:v', 'libwebp', '-f', 'webp']),
    'tiny.png': stillImage('color=c=red:s=8x8'),
    'huge.png': stillImage('color=c=gray:s=1024x1024,noise=alls=100:allf=t+u'),
  };
  for (const [file, bytes] of Object.entries(images)) await writeFile(join(dir, file), await bytes);
}

before(async () => {
  images = await scratchDir('listen-images-');
  await makeImages(images);
  service = await startService();
  svc = await boughtService(service, {
    product_id: 'instant-stream',
    email: 'owner@example.com',
    station_name: 'Harbour Radio',
    metadata: { station_description: 'Songs from the order' },
    parameters: { duration_hours: 1, max_listeners: 5, bitrate_kbps: 64 },
  });
  encoder = startFfmpegSource(svc.broadcast_url);
  (await listenWhenLive(svc.stream_url, 30_000)).close();
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  foreign?.close();
  encoder?.kill('SIGKILL');
  await service?.stop();
  if (images) await rm(images, { recursive: true, force: true });
});

describe('station profile and listen page', () => {
  test("the order's metadata describes the station; the time left is hidden unless the owner shows it", async () => {
    const listen = await publicState();
    assert.equal(listen.station_name, 'Harbour Radio');
    assert.equal(listen.description, 'Songs from the order');
    assert.equal(listen.show_time_left, false);
    assert.equal(listen.remaining_seconds, null);
    assert.equal(listen.expires_at, null);
    assert.equal(listen.artwork_url, null);
    const html = await (await publicGet(svc.endpoints.listen_page)).text();
    assert.match(html, /<span id="time-left" hidden><\/span>/);
    assert.match(html, /<section id="recent" aria-labelledby="recent-heading" hidden>/, 'no heading over nothing');
  });

  test('the owner sets name, description and time left; bad input is refused; strangers cannot', async () => {
    const set = await owner('PUT', '/profile', {
      body: { name: 'Harbour Radio 24/7', description: 'Sea shanties\nall night long', show_time_left: true },
    });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.equal(set.body.profile.name, 'Harbour Radio 24/7');
    assert.equal(set.body.profile.listen_page, svc.endpoints.listen_page);
    const listen = await publicState();
    assert.equal(listen.station_name, 'Harbour Radio 24/7');
    assert.equal(listen.description, 'Sea shanties\nall night long');
    assert.ok(listen.remaining_seconds > 3000 && listen.remaining_seconds <= 3600, String(listen.remaining_seconds));
    for (const bad of [{}, { name: '' }, { name: 'x'.repeat(101) }, { colour: 'red' }, { show_time_left: 'yes' }]) {
      const refused = await owner('PUT', '/profile', { body: bad });
      assert.equal(refused.status, 422, JSON.stringify(bad));
      assert.equal(refused.body.ok, false);
      assert.equal(refused.body.error.code, 'invalid_request');
    }
    const notJson = await owner('PUT', '/profile', { raw: Buffer.from('name=x'), type: 'text/plain' });
    assert.equal(notJson.status, 415);
    const stranger = await request({ ...service, apiKey: 'sk_nobody' }, 'PUT', `/services/${svc.service_id}/profile`, {
      body: { name: 'Taken over' },
    });
    assert.equal(stranger.status, 401);
    const unknown = await request(service, 'GET', '/services/svc_doesnotexistatall000/profile');
    assert.equal(unknown.status, 404);
    const back = await owner('PUT', '/profile', { body: { name: null } });
    assert.equal(back.body.profile.name, null);
    assert.equal((await publicState()).station_name, 'Harbour Radio', "null is the order's name again");
    assert.equal((await owner('GET', '/profile')).body.profile.show_time_left, true);
  });

  test('artwork: PNG, JPEG and WebP kept beside the media with their sizes; one at a time; others refused', async () => {
    const mediaDir = join(service.dataDir, 'media', svc.service_id);
    const upload = async (file: string, type: string) =>
      owner('PUT', '/profile/artwork', { raw: await readFile(join(images, file)), type });
    for (const [file, type, width, height] of [
      ['art.jpg', 'image/jpeg', 300, 200],
      ['art.webp', 'image/webp', 256, 256],
      ['art.png', 'image/png', 512, 512],
    ] as const) {
      const done = await upload(file, type);
      assert.equal(done.status, 200, JSON.stringify(done.body));
      assert.deepEqual(
        [done.body.profile.artwork.content_type, done.body.profile.artwork.width, done.body.profile.artwork.height],
        [type, width, height],
      );
    }
    const kept = (await readdir(mediaDir)).filter((name) => name.startsWith('.artwork-'));
    assert.equal(kept.length, 1, `the replaced artwork is removed: ${kept.join(', ')}`);
    const url = (await publicState()).artwork_url;
    const served = await publicGet(url);
    assert.equal(served.status, 200);
    assert.equal(served.headers.get('content-type'), 'image/png');
    assert.deepEqual(Buffer.from(await served.arrayBuffer()), await readFile(join(images, 'art.png')));
    const refusals: Array<[string | Buffer, string, number, string]> = [
      [Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>'), 'image/svg+xml', 415, 'unsupported_image_type'],
      ['art.png', 'image/jpeg', 415, 'image_type_mismatch'],
      ['tiny.png', 'image/png', 422, 'image_size_out_of_range'],
      ['huge.png', 'image/png', 413, 'image_too_large'],
    ];
    for (const [body, type, status, code] of refusals) {
      const raw = typeof body === 'string' ? await readFile(join(images, body)) : body;
      const refused = await owner('PUT', '/profile/artwork', { raw, type });
      assert.equal(refused.status, status, `${type}: ${JSON.stringify(refused.body)}`);
      assert.equal(refused.body.error.code, code);
    }
    assert.equal((await publicState()).artwork_url, url, 'a refused image changes nothing');
    assert.equal((await publicGet(url.replace(/[0-9a-f]{32}/, '0'.repeat(32)))).status, 404);
  });

  test('a link preview built from the Open Graph and Twitter tags has the title, description and image', async () => {
    const html = await (await publicGet(svc.endpoints.listen_page)).text();
    const tags = new Map(
      [...html.matchAll(/<meta (?:property|name)="([^"]+)" content="([^"]*)">/g)].map((m) => [m[1], decode(m[2])]),
    );
    const preview = {
      title: tags.get('og:title'),
      description: tags.get('og:description'),
      image: tags.get('og:image'),
    };
    console.log(`link preview: ${JSON.stringify(preview)}`);
    assert.equal(preview.title, 'Harbour Radio');
    assert.equal(preview.description, 'Sea shanties\nall night long');
    assert.equal(tags.get('og:url'), svc.endpoints.listen_page);
    assert.equal(tags.get('twitter:card'), 'summary');
    assert.equal(tags.get('twitter:image'), preview.image);
    const image = await publicGet(preview.image!);
    assert.equal(image.status, 200);
    assert.match(image.headers.get('content-type')!, /^image\/(png|jpeg|webp)$/);
    await renderPreview(preview as { title: string; description: string; image: string });
    const icon = /<link rel="icon" type="image\/png" sizes="32x32" href="([^"]+)">/.exec(html)![1];
    const png = await publicGet(decode(icon));
    assert.equal(png.status, 200);
    assert.equal(png.headers.get('content-type'), 'image/png');
    const ico = await publicGet(`${new URL(service.baseUrl).origin}/favicon.ico`);
    assert.equal(ico.status, 200);
    assert.equal(ico.headers.get('content-type'), 'image/x-icon');
    assert.deepEqual([...Buffer.from(await ico.arrayBuffer()).subarray(0, 4)], [0, 0, 1, 0], 'an icon file');
  });

  test('without JavaScript the page is an audio element with the stream and its native controls', async () => {
    const page = await newPage({ javaScriptEnabled: false });
    try {
      await page.goto(svc.endpoints.listen_page);
      assert.equal(await page.locator('audio#player').getAttribute('src'), svc.stream_url);
      assert.equal(await page.locator('audio#player').getAttribute('controls'), '');
      assert.equal(await page.locator('#play').isVisible(), false, 'no second control');
      assert.ok(await page.locator('audio#player').isVisible());
      const stream = await fetch(svc.stream_url, { signal: AbortSignal.timeout(10_000) });
      assert.equal(stream.headers.get('content-type'), 'audio/mpeg');
      await stream.body?.cancel();
    } finally {
      await page.context().close();
    }
  });

  for (const [label, options] of [
    ['desktop, dark', { viewport: { width: 1280, height: 800 }, colorScheme: 'dark' }],
    ['phone, light', { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, colorScheme: 'light' }],
  ] as const) {
    test(`in Chromium (${label}): one control of 44 px or more, usable by keyboard, no serious axe violation`, async () => {
      const page = await newPage({ ...options, deviceScaleFactor: 1, bypassCSP: true });
      try {
        await page.goto(svc.endpoints.listen_page);
        await page.waitForFunction(() => !document.querySelector('#play')!.hasAttribute('hidden'));
        assert.equal(
          await page.locator('audio#player').getAttribute('controls'),
          null,
          'the button is the one control',
        );
        const box = (await page.locator('#play').boundingBox())!;
        assert.ok(box.height >= 44 && box.width >= 44, `play button ${box.width}×${box.height}`);
        const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
        assert.equal(background, options.colorScheme === 'dark' ? 'rgb(17, 24, 39)' : 'rgb(255, 255, 255)');
        await page.addScriptTag({ content: await readFile(AXE, 'utf8') });
        const found = await page.evaluate(() => (window as any).axe.run(document));
        const serious = found.violations.filter((v: any) => v.impact === 'serious' || v.impact === 'critical');
        const rest = found.violations.map((v: any) => `${v.id} (${v.impact})`);
        console.log(`axe ${label}: ${found.passes.length} rules pass; violations: ${rest.join(', ') || 'none'}`);
        assert.deepEqual(
          serious.map((v: any) => `${v.id}: ${v.help}`),
          [],
        );
        await page.keyboard.press('Tab');
        assert.equal(await page.evaluate(() => document.activeElement?.id), 'play', 'the first Tab reaches Play');
        await page.keyboard.press('Enter');
        await waitFor('the stream to play from the keyboard', () => page.evaluate(playing), 30_000);
        assert.equal(await page.textContent('#play'), 'Pause');
        await mkdir(ARTIFACTS, { recursive: true });
        const shot = join(ARTIFACTS, `listen-page-${label.replace(/\W+/g, '-')}.png`);
        await page.screenshot({ path: shot, fullPage: true });
        console.log(`screenshot: ${shot}`);
      } finally {
        await page.context().close();
      }
    });
  }

  test('the embed fits in the iframe oEmbed declares, on a page of another origin, with and without script', async () => {
    const pageUrl = encodeURIComponent(svc.endpoints.listen_page);
    for (const [maxwidth, javaScriptEnabled] of [
      [undefined, true],
      [300, true],
      [undefined, false],
    ] as const) {
      const query = `url=${pageUrl}&format=json${maxwidth ? `&maxwidth=${maxwidth}` : ''}`;
      const oembed = (await (await publicGet(`${service.baseUrl}/listen/oembed?${query}`)).json()) as any;
      assert.equal(oembed.width, maxwidth ?? 400);
      assert.match(oembed.html, new RegExp(`width="${oembed.width}" height="${oembed.height}"`));
      const host = await foreignSite(`<!doctype html><title>A blog</title><h1>Our station</h1>${oembed.html}`);
      assert.notEqual(new URL(host).origin, new URL(service.baseUrl).origin);
      const page = await newPage({ viewport: { width: 800, height: 600 }, javaScriptEnabled });
      try {
        await page.goto(host);
        const embed = page.frameLocator('iframe');
        const control = embed.locator(javaScriptEnabled ? '#play' : 'audio#player');
        await control.waitFor({ state: 'visible', timeout: 30_000 });
        const frame = (await page.locator('iframe').boundingBox())!;
        const outside: string[] = [];
        for (const id of ['play', 'player', 'station', 'title', 'listeners', 'art']) {
          const box = await embed.locator(`#${id}`).boundingBox();
          if (!box) continue; // not shown in this variant (the button without script, the audio bar with it)
          const inside =
            box.x >= frame.x &&
            box.y >= frame.y &&
            box.x + box.width <= frame.x + frame.width + 0.5 &&
            box.y + box.height <= frame.y + frame.height + 0.5;
          if (!inside) outside.push(`${id} ${JSON.stringify(box)}`);
        }
        const main = (await embed.locator('main').boundingBox())!;
        const needed = Math.ceil(main.y + main.height - frame.y + 8); // the body's bottom padding
        console.log(`embed ${oembed.width}×${oembed.height}, script ${javaScriptEnabled}: needs ${needed} px`);
        assert.deepEqual([frame.width, frame.height], [oembed.width, oembed.height]);
        assert.deepEqual(outside, [], `the player bar is fully visible in ${JSON.stringify(frame)}`);
        assert.ok(
          needed <= oembed.height && needed >= oembed.height - 16,
          `declared ${oembed.height}, needs ${needed}`,
        );
        await mkdir(ARTIFACTS, { recursive: true });
        await page.screenshot({
          path: join(ARTIFACTS, `listen-embed-${oembed.width}${javaScriptEnabled ? '' : '-noscript'}.png`),
        });
        if (javaScriptEnabled) {
          await control.click();
          const inFrame = page.frames().find((f) => f.url().endsWith('/embed'))!;
          await waitFor('the embed to play', () => inFrame.evaluate(playing), 30_000);
        }
      } finally {
        await page.context().close();
      }
    }
  });
});

/**
 * The card a chat app draws from the tags (a "summary" card: the image in a square beside the title, the description
 * and the site), drawn in Chromium and kept as a screenshot: the image loads and the text fits.
 */
async function renderPreview(preview: { title: string; description: string; image: string }): Promise<void> {
  const text = (value: string) => value.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
  const card = `<!doctype html><meta charset="utf-8"><title>A chat</title>
    <style>body{font:14px system-ui;margin:16px}.card{display:flex;gap:12px;width:480px;border:1px solid #ccc;
    border-radius:8px;padding:12px}.card img{width:96px;height:96px;object-fit:cover;border-radius:4px}
    .card p{margin:4px 0;white-space:pre-line}.site{color:#666}</style>
    <div class="card"><img id="image" src="${text(preview.image)}" alt=""><div>
    <p class="site">${text(new URL(svc.endpoints.listen_page).host)}</p><p id="title"><b>${text(preview.title)}</b></p>
    <p id="description">${text(preview.description)}</p></div></div>`;
  const page = await newPage({ viewport: { width: 540, height: 180 }, deviceScaleFactor: 1 });
  try {
    await page.goto(await foreignSite(card));
    await page.waitForFunction(() => (document.querySelector('#image') as HTMLImageElement).complete);
    const drawn = await page.evaluate(() => {
      const fits = (id: string) => {
        const el = document.getElementById(id)!;
        return el.scrollWidth <= el.clientWidth && el.scrollHeight <= el.clientHeight + 1;
      };
      return {
        imageWidth: (document.querySelector('#image') as HTMLImageElement).naturalWidth,
        fits: fits('title') && fits('description'),
      };
    });
    assert.ok(drawn.imageWidth > 0, 'the preview image loads from its og:image address');
    assert.ok(drawn.fits, 'title and description fit the card');
    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'link-preview.png') });
  } finally {
    await page.context().close();
  }
}

function playing(): boolean {
  const audio = document.querySelector<HTMLAudioElement>('#player')!;
  return !audio.paused && audio.currentTime > 0;
}

async function newPage(options: BrowserContextOptions): Promise<Page> {
  const context = await browser!.newContext(options);
  return context.newPage();
}

/** A second server on another port: another origin, as a blog that pastes the embed would be. */
async function foreignSite(html: string): Promise<string> {
  foreign?.close();
  foreign = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(html));
  await new Promise<void>((resolve) => foreign!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(foreign.address() as AddressInfo).port}/`;
}

function decode(text: string): string {
  return text.replace(/&#(\d+);/g, (_m, code) => String.fromCharCode(Number(code)));
}
