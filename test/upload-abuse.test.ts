import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { audioChecks } from './support/audio-checks.js';
import { buy } from './support/purchase.js';
import { request, startService, type Service } from './support/service.js';
import { TestWallet } from './support/wallet.js';
import { requireStreamingTools } from './support/system-tools.js';

requireStreamingTools(['ffmpeg', 'ffprobe', 'icecast2']);

/** ffmpeg's output for these arguments (the output goes to stdout). */
function ffmpeg(args: string[]): Buffer {
  const out = spawnSync('ffmpeg', ['-v', 'error', ...args, 'pipe:1'], { maxBuffer: 64 * 1024 * 1024 });
  assert.equal(out.status, 0, String(out.stderr));
  return out.stdout;
}

/** The FLAC's metadata (with the STREAMINFO's offset) and its audio frames. */
function splitFlac(file: Buffer): { header: Buffer; streamInfo: number; frames: Buffer } {
  let at = 4;
  let streamInfo = -1;
  for (;;) {
    const type = file[at] & 0x7f;
    const last = file[at] & 0x80;
    if (type === 0) streamInfo = at + 4;
    at += 4 + file.readUIntBE(at + 1, 3);
    if (last) break;
  }
  return { header: Buffer.from(file.subarray(0, at)), streamInfo, frames: file.subarray(at) };
}

/** Sets STREAMINFO's 36-bit total sample count (0: unknown) and clears its MD5. */
function setTotalSamples(header: Buffer, streamInfo: number, total: bigint): void {
  header[streamInfo + 13] = (header[streamInfo + 13] & 0xf0) | Number((total >> 32n) & 0xfn);
  header.writeUInt32BE(Number(total & 0xffffffffn), streamInfo + 14);
  header.fill(0, streamInfo + 18, streamInfo + 34);
}

// 4 s of 7.1 silence at 192 kHz in the largest FLAC blocks: a few hundred bytes of frames.
const silence = () =>
  splitFlac(
    ffmpeg([
      '-f',
      'lavfi',
      '-i',
      'anullsrc=r=192000:cl=7.1',
      '-t',
      '4',
      '-c:a',
      'flac',
      '-frame_size',
      '65535',
      '-f',
      'flac',
    ]),
  );

/** A small FLAC that says it holds 50 hours of 8-channel 192 kHz audio. */
function declaresHours(): Buffer {
  const { header, streamInfo, frames } = silence();
  setTotalSamples(header, streamInfo, 50n * 3600n * 192_000n);
  return Buffer.concat([header, frames]);
}

/** A FLAC that declares no length and whose frames repeat: about a megabyte that decodes for 6 s or more. */
function decodesForMinutes(): Buffer {
  const { header, streamInfo, frames } = silence();
  setTotalSamples(header, streamInfo, 0n);
  return Buffer.concat([header, ...Array(2700).fill(frames)]);
}

describe('audio checks cannot be starved by one buyer', () => {
  let service: Service;
  let attacker: { apiKey: string; serviceId: string };
  let other: { apiKey: string; serviceId: string };

  before(
    async () => {
      // Two audio-check slots, as on a two-core host. A test decode of the attack's megabyte is cut after 2 s: it takes
      // about 6 s on an idle machine, within the default 10.5 s, and the cut would then be shown only under load.
      service = await startService({
        UPLOAD_DECODE_BASE_MS: '1500',
        UPLOAD_PROBE_CONCURRENCY: '2',
        UPLOAD_PROBE_QUEUE: '4',
        UPLOADS_PER_SERVICE: '4',
      });
      const dev = JSON.parse(await readFile(join(service.dataDir, 'dev.json'), 'utf8'));
      const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
      const buyer = async (name: string) => {
        const apiKey = JSON.parse((await service.cli(['keys', 'create', '--name', name])).stdout).api_key as string;
        const bought = await buy({ ...service, apiKey }, wallet, {
          product_id: 'temporary-autodj',
          email: 'dj@example.com',
          station_name: name,
          parameters: { duration_hours: 1, bitrate_kbps: 64, storage_mb: 20, listeners: 2 },
        });
        assert.equal(bought.status, 200, JSON.stringify(bought.body));
        return { apiKey, serviceId: bought.body.service.service_id as string };
      };
      attacker = await buyer('attacker');
      other = await buyer('other');
    },
    { timeout: 180_000 },
  );
  after(async () => {
    await service?.stop();
  });

  const put = (who: { apiKey: string; serviceId: string }, name: string, body: Buffer) =>
    request({ ...service, apiKey: who.apiKey }, 'PUT', `/services/${who.serviceId}/files/${name}`, {
      rawBody: body,
      headers: { 'content-type': 'application/octet-stream' },
    });

  test('declared properties far beyond real audio or the time bought are refused before any decode', async () => {
    const long = await put(attacker, 'hours.flac', declaresHours());
    assert.equal(long.status, 422, JSON.stringify(long.body));
    assert.equal(long.body.error.code, 'audio_beyond_limits');
    assert.match(long.body.error.message, /declares 50 h of audio, longer than the 1 h this service was bought for/);

    const wide = await put(
      attacker,
      'wide.wav',
      ffmpeg(['-f', 'lavfi', '-i', 'anullsrc=r=8000:cl=hexadecagonal', '-t', '0.1', '-f', 'wav']),
    );
    assert.equal(wide.body.error.code, 'audio_beyond_limits', JSON.stringify(wide.body));
    assert.match(wide.body.error.message, /16 audio channels; at most 8/);

    const fast = await put(
      attacker,
      'fast.wav',
      ffmpeg(['-f', 'lavfi', '-i', 'anullsrc=r=384000:cl=mono', '-t', '0.1', '-f', 'wav']),
    );
    assert.equal(fast.body.error.code, 'audio_beyond_limits', JSON.stringify(fast.body));
    assert.match(fast.body.error.message, /384000 Hz; at most 192000/);
    assert.deepEqual(
      (await request({ ...service, apiKey: attacker.apiKey }, 'GET', `/services/${attacker.serviceId}/files`)).body
        .files,
      [],
    );
  });

  test("one buyer's slow-to-check files hold at most its share of the slots and are cut short; another buyer's upload is checked meanwhile", {
    timeout: 300_000,
  }, async () => {
    const slow = decodesForMinutes();
    const attacks = [0, 1, 2].map((i) => put(attacker, `slow-${i}.flac`, slow));
    // Wait until the attacker's checks are decoding: one (its share) now, both slots before the fix.
    const deadline = Date.now() + 30_000;
    while (audioChecks(service.process.pid!) < 1 && Date.now() < deadline) await sleep(20);
    for (const end = Date.now() + 2000; audioChecks(service.process.pid!) < 2 && Date.now() < end; ) await sleep(20);

    const song = ffmpeg([
      '-f',
      'lavfi',
      '-i',
      'sine=frequency=440:duration=3',
      '-c:a',
      'libmp3lame',
      '-b:a',
      '64k',
      '-f',
      'mp3',
    ]);
    const accepted = await put(other, 'song.mp3', song);
    assert.equal(accepted.status, 201, JSON.stringify(accepted.body));
    assert.equal(accepted.body.file.name, 'song.mp3');

    const answers = await Promise.all(attacks);
    for (const answer of answers.filter((a) => a.status !== 201)) {
      assert.ok([422, 503].includes(answer.status), JSON.stringify(answer.body));
      assert.ok(['audio_beyond_limits', 'audio_check_busy'].includes(answer.body.error.code), answer.body.error.code);
    }
    const refused = answers.filter((a) => a.status === 422);
    assert.ok(refused.length >= 1, 'the decode is cut short, not run to its end');
    assert.match(
      refused[0].body.error.message,
      /checking it took more than the \d+(\.\d+)? s allowed for a file of \d+ bytes/,
    );
    const kept = answers
      .filter((a) => a.status === 201)
      .map((a) => a.body.file.name)
      .sort();
    const listed = (
      await request({ ...service, apiKey: attacker.apiKey }, 'GET', `/services/${attacker.serviceId}/files`)
    ).body.files;
    assert.deepEqual(listed.map((f: { name: string }) => f.name).sort(), kept);
  });
});
