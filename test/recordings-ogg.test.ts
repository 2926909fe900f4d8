import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { buy } from './support/purchase.js';
import { scratchDir, type Service, startService, request } from './support/service.js';
import { waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { decodedSeconds, sine } from './support/tones.js';
import { TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';

// An Ogg live source whose metadata changes start a new logical stream (a chained Ogg: each title its own link, as
// Ogg encoders announce titles): the recording's duration is the whole show, every link of it, for Vorbis and Opus.
requireStreamingTools(['icecast2', 'ffmpeg']);
// Each link outlasts the second the durations are checked to: a link left out fails them.
const LINKS = [
  { title: 'First', seconds: 3 },
  { title: 'Second', seconds: 2 },
  { title: 'Third', seconds: 3 },
];
const SHOW_SECONDS = LINKS.reduce((sum, l) => sum + l.seconds, 0);
const CODECS = {
  vorbis: ['-c:a', 'libvorbis', '-q:a', '0', '-ac', '1', '-ar', '22050'],
  opus: ['-c:a', 'libopus', '-b:a', '32k', '-ac', '1'],
};

let service: Service;
let wallet: TestWallet;
const sockets: Socket[] = [];

/** One Ogg file of several links, one per title, as an encoder sends a show whose titles change. */
async function chainedOgg(codec: keyof typeof CODECS): Promise<Buffer> {
  const encoding = [...CODECS[codec], '-f', 'ogg'];
  const links = LINKS.map((link, i) =>
    sine({ seconds: link.seconds, frequency: 330 + 110 * i, tags: { title: link.title } }, encoding),
  );
  return Buffer.concat(await Promise.all(links));
}

/** A source as libshout sends one: PUT with Expect: 100-continue, then the bytes at the pace of playback. */
async function sendPaced(broadcastUrl: string, bytes: Buffer, seconds: number): Promise<void> {
  const url = new URL(broadcastUrl);
  const socket = connect(Number(url.port), url.hostname);
  sockets.push(socket);
  const auth = Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString(
    'base64',
  );
  socket.write(
    `PUT ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Basic ${auth}\r\n` +
      'Content-Type: application/ogg\r\nIce-Public: 0\r\nExpect: 100-continue\r\n\r\n',
  );
  const answer = await new Promise<string>((resolve, reject) => {
    socket.once('data', (chunk) => resolve(chunk.toString('latin1')));
    socket.once('error', reject);
  });
  assert.match(answer, /^HTTP\/1\.[01] (100|200)/, answer);
  const began = Date.now();
  let sent = 0;
  while (sent < bytes.length) {
    const due = Math.min(bytes.length, Math.ceil((bytes.length * (Date.now() - began + 300)) / (seconds * 1000)));
    if (due > sent) socket.write(bytes.subarray(sent, due));
    sent = due;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await new Promise((resolve) => setTimeout(resolve, 500));
  socket.end();
}

/** The duration ffprobe states for Ogg bytes (its format's, from the granule positions it reads). */
async function probedSeconds(bytes: Buffer): Promise<number> {
  const file = join(await scratchDir('probed-ogg-'), 'show.ogg');
  await writeFile(file, bytes);
  const args = ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', file];
  return Number(execFileSync('ffprobe', args, { stdio: ['ignore', 'pipe', 'ignore'] }).toString());
}

/** How many logical streams begin in Ogg bytes: pages with the beginning-of-stream flag. */
function logicalStreams(bytes: Buffer): number {
  let count = 0;
  for (let at = bytes.indexOf('OggS'); at >= 0; at = bytes.indexOf('OggS', at + 4)) {
    if (bytes[at + 4] === 0 && (bytes[at + 5] & 2) !== 0) count++;
  }
  return count;
}

before(async () => {
  // One source session per show: its end need not wait production's minute for the source to come back (the wait for
  // it is bounded below that minute).
  service = await startService({ RECORDING_GAP_SECONDS: '5' });
  const dev = await devFile(service.dataDir);
  wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
});

after(async () => {
  for (const socket of sockets) socket.destroy();
  await service?.stop();
});

describe('recordings of chained Ogg sources', () => {
  test('Vorbis and Opus shows whose titles start new links are recorded for their whole length', {
    timeout: 240_000,
  }, async () => {
    const shows = await Promise.all(
      (Object.keys(CODECS) as (keyof typeof CODECS)[]).map(async (codec) => {
        const bought = await buy(service, wallet, {
          product_id: 'instant-stream',
          email: 'owner@example.com',
          station_name: `Chained ${codec}`,
          parameters: { duration_hours: 1, max_listeners: 5, bitrate_kbps: 128, recording: true },
        });
        assert.equal(bought.status, 200, JSON.stringify(bought.body));
        return { codec, svc: bought.body.service, bytes: await chainedOgg(codec) };
      }),
    );
    for (const { bytes } of shows) {
      assert.equal(logicalStreams(bytes), LINKS.length, 'one logical stream per title');
      assert.ok((await decodedSeconds(bytes)) >= SHOW_SECONDS - 0.1, 'the source plays the whole show');
      assert.ok((await probedSeconds(bytes)) < SHOW_SECONDS - 2, 'where ffprobe reads one link only');
    }
    await Promise.all(shows.map(({ svc, bytes }) => sendPaced(svc.broadcast_url, bytes, SHOW_SECONDS)));
    for (const { codec, svc } of shows) {
      const path = `/services/${svc.service_id}/recordings`;
      const recording = await waitFor(
        `the ${codec} show to end 5 s after its source`,
        async () => {
          const items = (await request(service, 'GET', path)).body.recordings;
          return items.length === 1 && items[0].status === 'complete' && items[0];
        },
        45_000,
      );
      assert.equal(recording.content_type, 'audio/ogg');
      const file = Buffer.from(await (await fetch(recording.download_url)).arrayBuffer());
      const played = await decodedSeconds(file);
      assert.ok(Math.abs(played - SHOW_SECONDS) <= 1, `${codec}: the file plays ${played} s of ${SHOW_SECONDS}`);
      assert.ok(
        Math.abs(recording.duration_seconds - SHOW_SECONDS) <= 1,
        `${codec}: ${recording.duration_seconds} s recorded, ${SHOW_SECONDS} s sent`,
      );
    }
  });
});
