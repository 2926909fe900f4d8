/**
 * Another buyer's upload is checked while the heaviest uploads two free API keys can send are: the crafted FLAC of the
 * attack (20 h of 8-channel 192 kHz silence padded to 123 MB into a 24 h AutoDJ service), then the heaviest files the
 * header rules let through (24 h of stereo 48 kHz in 9 MB, counted here as large files). End to end: real uploads,
 * ffprobe and ffmpeg, two audio-check slots as on a two-core host.
 */
import assert from 'node:assert/strict';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { audioChecks } from './support/audio-checks.js';
import { buy } from './support/purchase.js';
import { request, startService, type Service } from './support/service.js';
import { requireStreamingTools } from './support/system-tools.js';
import { flacSilence, tone } from './support/tones.js';
import { buyerWallet } from './support/dev-file.js';

requireStreamingTools(['ffmpeg', 'ffprobe', 'icecast2']);

type Buyer = { apiKey: string; serviceId: string };

let service: Service;
let attackers: Buyer[];
let other: Buyer;
let song: Buffer;

before(
  async () => {
    service = await startService({
      UPLOAD_PROBE_CONCURRENCY: '2',
      UPLOAD_PROBE_QUEUE: '8',
      // The 9 MB files of the second test count as large, as the attack's 123 MB ones do by default.
      UPLOAD_PROBE_LARGE_MB: '8',
    });
    const wallet = await buyerWallet(service);
    const buyer = async (name: string, hours: number, storageMb: number, price: string): Promise<Buyer> => {
      // A free key for each: the CLI's keys are the same kind of key POST /keys gives anyone.
      const apiKey = JSON.parse((await service.cli(['keys', 'create', '--name', name])).stdout).api_key as string;
      const bought = await buy({ ...service, apiKey }, wallet, {
        product_id: 'temporary-autodj',
        email: 'dj@example.com',
        station_name: name,
        parameters: { duration_hours: hours, bitrate_kbps: 64, storage_mb: storageMb, listeners: 2 },
      });
      assert.equal(bought.status, 200, JSON.stringify(bought.body));
      assert.equal(bought.body.order.amount.amount, price);
      return { apiKey, serviceId: bought.body.service.service_id as string };
    };
    // Two 24 h AutoDJ services of the shipped catalog, 0.49 USDC each, with room for a 123 MB file.
    attackers = [await buyer('attacker-a', 24, 130, '0.49'), await buyer('attacker-b', 24, 130, '0.49')];
    other = await buyer('other', 1, 20, '0.49');
    song = await tone(20, 'Twenty Seconds', ['-c:a', 'libmp3lame', '-b:a', '128k', '-f', 'mp3']);
  },
  { timeout: 240_000 },
);
after(async () => {
  await service?.stop();
});

const put = (who: Buyer, name: string, body: Buffer) =>
  request({ ...service, apiKey: who.apiKey }, 'PUT', `/services/${who.serviceId}/files/${name}`, {
    rawBody: body,
    headers: { 'content-type': 'application/octet-stream' },
  });

/** Sends the uploads, each answer stamped with when it came. */
function timed(uploads: Array<() => ReturnType<typeof put>>) {
  return uploads.map(async (send) => {
    const answer = await send();
    return { ...answer, at: performance.now() };
  });
}

/** Waits until `checks` audio checks run in the service, or every one of `answers` has come. */
async function whileChecked(checks: number, answers: Array<Promise<unknown>>, deadlineMs: number): Promise<void> {
  let settled = 0;
  for (const a of answers) a.finally(() => settled++);
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline && settled < answers.length && audioChecks(service.process.pid!) < checks) {
    await sleep(20);
  }
}

/** Whether each of these services holds a whole upload of `bytes` not yet answered (received, so checked or queued). */
async function received(who: Buyer[], bytes: number): Promise<boolean> {
  const whole = async ({ serviceId }: Buyer) => {
    const dir = join(service.dataDir, 'media', serviceId);
    const partials = (await readdir(dir).catch(() => [])).filter((name) => name.startsWith('.upload-'));
    const sizes = await Promise.all(
      partials.map((name) =>
        stat(join(dir, name)).then(
          (s) => s.size,
          () => 0,
        ),
      ),
    );
    return sizes.some((size) => size === bytes);
  };
  return (await Promise.all(who.map(whole))).every(Boolean);
}

describe('a small upload is checked while two free keys upload the heaviest files they can', () => {
  test('the crafted FLAC (20 h, 8 channels, 192 kHz, 123 MB) is refused from its header; a 20 s MP3 sent meanwhile is kept', {
    timeout: 300_000,
  }, async () => {
    const crafted = flacSilence({ seconds: 72_000, rate: 192_000, channels: 8, sizeBytes: 123_000_000 });
    const attacks = timed(attackers.map((who, i) => () => put(who, `silence-${i}.flac`, crafted)));
    // The song goes once both crafted files are in their checks (both slots, before the header was read), or
    // answered.
    await whileChecked(2, attacks, 120_000);
    const sent = performance.now();
    const [kept] = timed([() => put(other, 'song.mp3', song)]);
    const answer = await kept;
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
    assert.ok(Math.abs(answer.body.file.duration_seconds - 20) < 0.5, JSON.stringify(answer.body));
    const waited = answer.at - sent;
    console.log(`a 20 s MP3 sent during the crafted uploads' checks: kept in ${Math.round(waited)} ms`);
    assert.ok(waited < 10_000, `within the 10 s a check may wait: ${waited} ms`);

    for (const refused of await Promise.all(attacks)) {
      assert.equal(refused.status, 422, JSON.stringify(refused.body));
      assert.equal(refused.body.error.code, 'audio_beyond_limits');
      assert.match(refused.body.error.message, /8 audio channels; at most 2/);
    }
    for (const who of attackers) {
      const files = await request({ ...service, apiKey: who.apiKey }, 'GET', `/services/${who.serviceId}/files`);
      assert.deepEqual(files.body.files, []);
    }
  });

  test('two of the heaviest files the header lets through, from two keys: a 20 s MP3 is checked in the slot they leave, before either', {
    timeout: 300_000,
  }, async () => {
    // 24 h of stereo 48 kHz in 9 MB: the most audio a file of its size may declare, accepted after a read through
    // and a few windows. Large files may hold every slot but one: the second waits, and the song runs beside the first.
    const day = flacSilence({ seconds: 86_400, rate: 48_000, channels: 2, sizeBytes: 9_000_000 });
    const heavy = timed(attackers.map((who, i) => () => put(who, `day-${i}.flac`, day)));
    // The song goes once both files are received whole (both in a check, or one checked and one waiting).
    const deadline = Date.now() + 60_000;
    while (!(await received(attackers, day.length))) {
      assert.ok(Date.now() < deadline, 'both large uploads received');
      await sleep(20);
    }
    await sleep(200);
    const sent = performance.now();
    const [kept] = timed([() => put(other, 'song-2.mp3', song)]);
    const answer = await kept;
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
    const answers = await Promise.all(heavy);
    console.log(
      `a 20 s MP3 beside two 9 MB day-long files: kept in ${Math.round(answer.at - sent)} ms;` +
        ` the large ones answered ${answers.map((a) => Math.round(a.at - sent)).join(' and ')} ms after it was sent`,
    );
    for (const a of answers) {
      assert.equal(a.status, 201, JSON.stringify(a.body));
      assert.ok(a.at > answer.at, 'the small upload was not checked after a large one');
    }
  });
});
