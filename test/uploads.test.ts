import assert from 'node:assert/strict';
import { readdirSync, statSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { buy } from './support/purchase.js';
import { buildRawRequest, sendRaw } from './support/raw-http.js';
import { request, scratchDir, startService, type Service } from './support/service.js';
import { audioChecks } from './support/audio-checks.js';
import { connectListener, hasMpegFrame, waitFor } from './support/streaming.js';
import { sine, tone } from './support/tones.js';
import { icecastTitle } from './support/icecast-title.js';
import { requireStreamingTools } from './support/system-tools.js';
import { buyerWallet } from './support/dev-file.js';
import { boughtService } from './support/live-stream.js';

requireStreamingTools(['ffmpeg', 'ffprobe', 'icecast2']);

const MB = 1024 * 1024;
// Short timeouts so the slow upload can outlast the request timeout quickly. (Node's own server.requestTimeout only
// acts when it is above headersTimeout: a request timeout above the headers timeout keeps this test able to fail
// with it.)
const HEADERS_TIMEOUT_MS = 3000;
const REQUEST_TIMEOUT_MS = 4000;
const IDLE_TIMEOUT_MS = 2000;

/** Bytes of every file (finished or partial) in a folder. */
function bytesIn(dir: string): number {
  let total = 0;
  for (const name of (() => {
    try {
      return readdirSync(dir);
    } catch {
      return [];
    }
  })()) {
    try {
      total += statSync(join(dir, name)).size;
    } catch {
      /* gone meanwhile */
    }
  }
  return total;
}

/** Sends an upload on a raw socket, `chunkBytes` every `everyMs`, and reads the answer. */
function slowUpload(
  origin: string,
  apiKey: string,
  path: string,
  body: Buffer,
  chunkBytes: number,
  everyMs: number,
): Promise<{ status: number; body: any; ms: number }> {
  const url = new URL(origin + path);
  const began = performance.now();
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    let answer = Buffer.alloc(0);
    let sent = 0;
    const next = () => {
      if (sent >= body.length || socket.destroyed) return;
      socket.write(body.subarray(sent, sent + chunkBytes));
      sent += chunkBytes;
      setTimeout(next, everyMs);
    };
    socket.on('connect', () => {
      socket.write(
        `PUT ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${apiKey}\r\nContent-Type: audio/wav\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
      );
      next();
    });
    socket.on('data', (chunk: Buffer) => {
      answer = Buffer.concat([answer, chunk]);
    });
    socket.on('error', reject);
    socket.on('close', () => {
      const text = answer.toString();
      const status = Number(/^HTTP\/1\.1 (\d+)/.exec(text)?.[1] ?? 0);
      const json = text.slice(text.indexOf('\r\n\r\n') + 4);
      resolve({ status, body: json ? JSON.parse(json) : undefined, ms: performance.now() - began });
    });
  });
}

// Three services side by side: the timeouts (mostly waiting for them) and the crash (mostly a restart and a lease
// running out) each on a serve of their own, beside the tests of what is accepted and the limits on how much.
// Within each, one test after the other (subtests would inherit the concurrency).
describe('uploads', { concurrency: true }, () => {
  describe('AutoDJ uploads', { concurrency: 1 }, autodjUploads);
  describe('upload timeouts', { concurrency: 1 }, uploadTimeouts);
  describe('an upload cut short by a crash', { concurrency: 1 }, crashedUpload);
});

/** A serve with these settings, and a way to buy AutoDJ services (5 MB of storage each) on it. */
async function uploadService(env: Record<string, string>) {
  const service = await startService(env);
  const wallet = await buyerWallet(service);
  const autodj = (station: string) =>
    buy(service, wallet, {
      product_id: 'temporary-autodj',
      email: 'dj@example.com',
      station_name: station,
      parameters: { duration_hours: 2, bitrate_kbps: 64, storage_mb: 5, listeners: 3 },
    }).then((r) => {
      assert.equal(r.status, 200, JSON.stringify(r.body));
      return r.body.service;
    });
  return { service, autodj };
}

const timeoutEnv = {
  HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
  REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
  UPLOAD_IDLE_TIMEOUT_MS: String(IDLE_TIMEOUT_MS),
};

function autodjUploads(): void {
  let service: Service;
  let formats: any;
  let disk: any;
  let third: any;
  let secret: string;

  before(
    async () => {
      let autodj;
      ({ service, autodj } = await uploadService({
        ...timeoutEnv,
        UPLOAD_PROBE_CONCURRENCY: '1',
        UPLOAD_PROBE_QUEUE: '1',
        UPLOADS_PER_SERVICE: '2',
      }));
      formats = await autodj('Formats FM');
      disk = await autodj('Disk FM');
      third = await autodj('Third FM');
      // Someone else's file on the server's disk, which a playlist upload must not reach.
      secret = join(await scratchDir('upload-secret-'), 'secret.mp3');
      await writeFile(secret, await tone(2, 'Secret', ['-c:a', 'libmp3lame', '-f', 'mp3']));
    },
    { timeout: 180_000 },
  );
  after(async () => {
    await service?.stop();
  });

  const put = (id: string, name: string, body: Buffer) =>
    request(service, 'PUT', `/services/${id}/files/${encodeURIComponent(name)}`, {
      rawBody: body,
      headers: { 'content-type': 'application/octet-stream' },
    });
  const mediaDir = (id: string) => join(service.dataDir, 'media', id);

  test('refuses playlists and files that only start like audio, and bodies without Content-Length', async () => {
    const id = formats.service_id;
    const hls = `#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:10\n#EXT-X-MEDIA-SEQUENCE:0\n#EXTINF:10.0,\n${secret}\n#EXT-X-ENDLIST\n`;
    const playlists: Record<string, string> = {
      'innocent.mp3': hls,
      'concat.mp3': `ffconcat version 1.0\nfile ${secret}\n`,
      'list.mp3': `${secret}\n`,
      'radio.ogg': `[playlist]\nNumberOfEntries=1\nFile1=file:${secret}\n`,
      'session.flac': `v=0\no=- 0 0 IN IP4 127.0.0.1\ns=x\nc=IN IP4 127.0.0.1\nt=0 0\nm=audio 5004 RTP/AVP 96\n`,
    };
    for (const [name, text] of Object.entries(playlists)) {
      const answer = await put(id, name, Buffer.from(text));
      assert.equal(answer.status, 415, `${name}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.error.code, 'playlist_not_accepted');
      assert.equal(answer.body.error.retryable, false);
      assert.match(answer.body.error.message, /MP3, AAC, M4A, Ogg/);
    }
    // An MPEG frame header, or an ID3 tag, in front of a playlist.
    const mp3Header = Buffer.from([0xff, 0xfb, 0x90, 0x64]);
    const id3 = Buffer.concat([Buffer.from('ID3'), Buffer.from([3, 0, 0, 0, 0, 0, 0])]);
    for (const [name, body] of [
      ['framed.mp3', Buffer.concat([mp3Header, Buffer.from(hls)])],
      ['tagged.mp3', Buffer.concat([id3, Buffer.from(hls)])],
    ] as const) {
      const answer = await put(id, name, body);
      assert.equal(answer.status, 422, `${name}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.error.code, 'not_audio');
    }
    const chunked = await sendRaw(
      service.baseUrl.replace(/\/api\/v1$/, ''),
      buildRawRequest({
        method: 'PUT',
        target: `/api/v1/services/${id}/files/chunked.wav`,
        framing: 'chunked',
        body: await tone(1, 'Chunked', ['-f', 'wav']),
        headers: [
          ['Authorization', `Bearer ${service.apiKey}`],
          ['Content-Type', 'audio/wav'],
        ],
      }),
    );
    assert.equal(chunked.status, 411);
    assert.equal(JSON.parse(chunked.body.toString()).error.code, 'length_required');

    assert.deepEqual((await request(service, 'GET', `/services/${id}/files`)).body.files, []);
    assert.deepEqual(await readdir(mediaDir(id)).catch(() => []), [], 'nothing kept on disk');
  });

  test('accepts mp3, aac, m4a, ogg (vorbis, opus), flac and wav, and the AutoDJ plays each', {
    timeout: 120_000,
  }, async () => {
    const id = formats.service_id;
    const made: Record<string, [Buffer, string]> = {
      'one.mp3': [await tone(1.5, 'One', ['-c:a', 'libmp3lame', '-b:a', '64k', '-f', 'mp3']), 'mp3'],
      'two.aac': [await tone(1.5, 'Two', ['-c:a', 'aac', '-f', 'adts']), 'aac'],
      'three.m4a': [Buffer.alloc(0), 'mov,mp4,m4a,3gp,3g2,mj2'],
      'four.ogg': [await tone(1.5, 'Four', ['-c:a', 'libvorbis', '-f', 'ogg']), 'ogg'],
      'five.opus': [await tone(1.5, 'Five', ['-c:a', 'libopus', '-f', 'ogg']), 'ogg'],
      'six.flac': [await tone(1.5, 'Six', ['-f', 'flac']), 'flac'],
      'seven.wav': [await tone(1.5, 'Seven', ['-f', 'wav']), 'wav'],
    };
    // MP4 cannot be written to a pipe without fragmenting: write a real file, with its index at the end.
    const m4a = join(await scratchDir('upload-m4a-'), 'three.m4a');
    await sine({ seconds: 1.5, frequency: 523, tags: { title: 'Three' } }, ['-c:a', 'aac'], m4a);
    made['three.m4a'][0] = await readFile(m4a);

    for (const [name, [body, format]] of Object.entries(made)) {
      const answer = await put(id, name, body);
      assert.equal(answer.status, 201, `${name}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.file.format, format, name);
      assert.equal(answer.body.file.size_bytes, body.length);
      assert.ok(
        Math.abs(answer.body.file.duration_seconds - 1.5) < 0.2,
        `${name}: ${answer.body.file.duration_seconds} s`,
      );
    }

    // Every track's title shows on the mount as the AutoDJ plays it, and nothing is skipped.
    const streamUrl = (await request(service, 'GET', `/services/${id}`)).body.service.stream_url as string;
    const listener = await connectListener(streamUrl);
    const mount = new URL(streamUrl).pathname;
    const titles = new Set<string>();
    await waitFor(
      'every title on air',
      async () => {
        const title = await icecastTitle(service, mount);
        if (title) titles.add(title.replace(/^Test Band - /, ''));
        // ADTS has no tags: the AutoDJ shows the file name.
        return ['One', 'two.aac', 'Three', 'Four', 'Five', 'Six', 'Seven'].every((t) => titles.has(t));
      },
      60_000,
    ).catch((e) => {
      throw new Error(`${e.message}; seen: ${[...titles].join(', ')}\n${service.output().slice(-3000)}`);
    });
    listener.close();
    assert.ok(hasMpegFrame(listener.received()));
    assert.doesNotMatch(service.output(), /AutoDJ skipped a file/);
  });

  test('parallel uploads never put more than the quota on disk; the ones beyond get a clear, retryable error', {
    timeout: 120_000,
  }, async () => {
    const id = disk.service_id;
    const quota = 5 * MB;
    let peak = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, bytesIn(mediaDir(id)));
        await sleep(5);
      }
    })();

    // 20 at once of 1 MB, then 10 at once of 4.5 MB after the first burst's files are deleted.
    const small = await tone(6.5, 'Small', ['-ac', '2', '-f', 'wav']);
    const large = await tone(27.5, 'Large', ['-ac', '2', '-f', 'wav']);
    assert.ok(small.length > 1 * MB && large.length > 4.5 * MB && large.length < quota);
    const bursts: Array<Awaited<ReturnType<typeof put>>[]> = [];
    bursts.push(await Promise.all(Array.from({ length: 20 }, (_, i) => put(id, `small-${i}.wav`, small))));
    for (const file of (await request(service, 'GET', `/services/${id}/files`)).body.files)
      await request(service, 'DELETE', `/services/${id}/files/${file.name}`);
    bursts.push(await Promise.all(Array.from({ length: 10 }, (_, i) => put(id, `large-${i}.wav`, large))));
    sampling = false;
    await sampler;

    const all = bursts.flat();
    const codes = all.map((a) => (a.status === 201 ? 'stored' : a.body.error.code));
    console.log(
      `outcomes: ${JSON.stringify(codes.reduce((n: Record<string, number>, c) => ({ ...n, [c]: (n[c] ?? 0) + 1 }), {}))}; peak on disk ${(peak / MB).toFixed(2)} MB of ${quota / MB} MB`,
    );
    assert.ok(peak <= quota, `${peak} bytes on disk at peak, ${quota} bought`);
    assert.ok(
      bursts[0].some((a) => a.status === 201) && bursts[1].filter((a) => a.status === 201).length === 1,
      codes.join(),
    );
    for (const answer of all.filter((a) => a.status !== 201)) {
      assert.ok([429, 413, 503].includes(answer.status), JSON.stringify(answer.body));
      if (answer.status !== 413) {
        assert.equal(answer.body.error.code, answer.status === 429 ? 'too_many_uploads' : 'audio_check_busy');
        assert.equal(answer.body.error.retryable, true);
        assert.ok(Number(answer.headers.get('retry-after')) > 0);
      } else {
        assert.equal(answer.body.error.code, 'storage_quota_exceeded');
      }
    }
    assert.ok(
      all.some((a) => a.status === 429),
      'more than two at once to one service are turned away',
    );
    const listed = (await request(service, 'GET', `/services/${id}/files`)).body.files;
    assert.ok(listed.reduce((n: number, f: any) => n + f.size_bytes, 0) <= quota);
    assert.deepEqual(
      (await readdir(mediaDir(id))).filter((n) => n.startsWith('.')),
      [],
      'no partial upload left',
    );
  });

  test('audio checks run one at a time here (UPLOAD_PROBE_CONCURRENCY=1); beyond the queue uploads get a retryable 503', {
    timeout: 120_000,
  }, async () => {
    for (const file of (await request(service, 'GET', `/services/${disk.service_id}/files`)).body.files)
      await request(service, 'DELETE', `/services/${disk.service_id}/files/${file.name}`);
    const song = await tone(150, 'Long', ['-c:a', 'libmp3lame', '-b:a', '32k', '-f', 'mp3']);
    let most = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        most = Math.max(most, audioChecks(service.process.pid!));
        await sleep(10);
      }
    })();
    const ids = [formats.service_id, disk.service_id, third.service_id];
    const answers = await Promise.all(ids.flatMap((id) => [0, 1].map((i) => put(id, `long-${i}.mp3`, song))));
    sampling = false;
    await sampler;
    console.log(`statuses ${answers.map((a) => a.status).join(' ')}; at most ${most} audio check(s) at once`);
    assert.ok(most <= 1, `${most} audio checks at once`);
    assert.ok(answers.some((a) => a.status === 201));
    const busy = answers.filter((a) => a.status !== 201);
    assert.ok(busy.length > 0, 'six uploads at once overflow one check and a queue of one');
    for (const answer of busy) {
      assert.equal(answer.status, 503, JSON.stringify(answer.body));
      assert.equal(answer.body.error.code, 'audio_check_busy');
      assert.equal(answer.body.error.retryable, true);
      assert.ok(Number(answer.headers.get('retry-after')) > 0);
    }
    for (const id of ids) await request(service, 'DELETE', `/services/${id}/files/long-0.mp3`);
    for (const id of ids) await request(service, 'DELETE', `/services/${id}/files/long-1.mp3`);
  });
}

function uploadTimeouts(): void {
  let service: Service;
  let slow: any;
  before(
    async () => {
      let autodj;
      ({ service, autodj } = await uploadService(timeoutEnv));
      slow = await autodj('Slow FM');
    },
    { timeout: 180_000 },
  );
  after(async () => {
    await service?.stop();
  });

  test('a slow upload that takes longer than the request timeout succeeds; one that stalls gets the idle timeout', {
    timeout: 120_000,
  }, async () => {
    const id = slow.service_id;
    const body = await tone(3, 'Slow', ['-f', 'wav']); // ~530 kB
    // Other requests still have the request timeout: a JSON body that never completes (its wait runs beside the
    // uploads').
    const partialJsonAnswer = sendRaw(
      service.baseUrl.replace(/\/api\/v1$/, ''),
      buildRawRequest({
        method: 'PUT',
        target: `/api/v1/services/${id}/playlist`,
        body: Buffer.from('{"playlist":'),
        headers: [
          ['Authorization', `Bearer ${service.apiKey}`],
          ['Content-Type', 'application/json'],
          ['Content-Length', '100'],
        ],
      }),
      30_000,
    );
    partialJsonAnswer.catch(() => {}); // awaited at the end: a failure before then is not an unhandled rejection
    const chunk = 4096;
    const everyMs = Math.ceil((chunk / body.length) * REQUEST_TIMEOUT_MS * 2); // the whole body in about twice the request timeout
    const slowAnswer = await slowUpload(
      service.baseUrl.replace(/\/api\/v1$/, ''),
      service.apiKey,
      `/api/v1/services/${id}/files/slow.wav`,
      body,
      chunk,
      everyMs,
    );
    console.log(
      `${body.length} bytes in ${Math.round(slowAnswer.ms)} ms (request timeout ${REQUEST_TIMEOUT_MS} ms): ${slowAnswer.status}`,
    );
    assert.ok(slowAnswer.ms > REQUEST_TIMEOUT_MS);
    assert.equal(slowAnswer.status, 201, JSON.stringify(slowAnswer.body));
    assert.equal(slowAnswer.body.file.size_bytes, body.length);

    // Half the body, then nothing.
    const began = performance.now();
    const stalled = await sendRaw(
      service.baseUrl.replace(/\/api\/v1$/, ''),
      buildRawRequest({
        method: 'PUT',
        target: `/api/v1/services/${id}/files/stalled.wav`,
        body: body.subarray(0, body.length / 2),
        headers: [
          ['Authorization', `Bearer ${service.apiKey}`],
          ['Content-Type', 'audio/wav'],
          ['Content-Length', String(body.length)],
        ],
      }),
      30_000,
    );
    const answer = JSON.parse(stalled.body.toString());
    console.log(
      `stalled upload answered ${stalled.status} after ${Math.round(performance.now() - began)} ms (idle timeout ${IDLE_TIMEOUT_MS} ms)`,
    );
    assert.equal(stalled.status, 408);
    assert.equal(answer.error.code, 'upload_stalled');
    assert.equal(answer.error.retryable, true);
    assert.deepEqual(
      (await request(service, 'GET', `/services/${id}/files`)).body.files.map((f: any) => f.name),
      ['slow.wav'],
    );

    const partialJson = await partialJsonAnswer;
    assert.equal(partialJson.status, 408);
    assert.equal(JSON.parse(partialJson.body.toString()).error.code, 'request_timeout');
  });
}

function crashedUpload(): void {
  test('leaves no partial file behind and gives its reserved storage back', { timeout: 300_000 }, async () => {
    const env = { UPLOAD_RESERVATION_LEASE_MS: '3000' };
    let service = await startService(env);
    try {
      const id = (
        await boughtService(service, {
          product_id: 'temporary-autodj',
          email: 'dj@example.com',
          station_name: 'Crash FM',
          parameters: { duration_hours: 2, bitrate_kbps: 64, storage_mb: 5, listeners: 3 },
        })
      ).service_id;
      const dir = join(service.dataDir, 'media', id);
      const large = await tone(27.5, 'Large', ['-ac', '2', '-f', 'wav']); // more than half the 5 MB
      const url = new URL(service.baseUrl);

      // Half the file arrives, then the server dies.
      const socket = connect(Number(url.port), url.hostname);
      socket.on('error', () => {});
      socket.write(
        `PUT ${url.pathname}/services/${id}/files/large.wav HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${service.apiKey}\r\nContent-Length: ${large.length}\r\n\r\n`,
      );
      socket.write(large.subarray(0, large.length / 2));
      await waitFor('half the upload on disk', () => bytesIn(dir) >= MB, 30_000);
      await service.stop('SIGKILL');
      socket.destroy();

      service = await startService(env, { dataDir: service.dataDir });
      assert.deepEqual(await readdir(dir), [], 'the partial upload was removed at start');
      // Its reservation lapses by itself: the whole file fits again.
      const began = performance.now();
      let answer;
      for (;;) {
        answer = await request(service, 'PUT', `/services/${id}/files/large.wav`, {
          rawBody: large,
          headers: { 'content-type': 'audio/wav' },
        });
        if (answer.status !== 413 || performance.now() - began > 30_000) break;
        await sleep(500);
      }
      console.log(
        `the crashed upload's storage was free again ${Math.round(performance.now() - began)} ms after the restart (lease 3000 ms)`,
      );
      assert.equal(answer.status, 201, JSON.stringify(answer.body));
    } finally {
      await service.stop();
    }
  });
}
