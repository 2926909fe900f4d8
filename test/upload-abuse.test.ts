import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { buy } from './support/purchase.js';
import { request, startService, type Service } from './support/service.js';
import { requireStreamingTools } from './support/system-tools.js';
import { flacSilence, lavfi } from './support/tones.js';
import { buyerWallet } from './support/dev-file.js';

requireStreamingTools(['ffmpeg', 'ffprobe', 'icecast2']);

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

// 4 s of stereo silence at 48 kHz in the largest FLAC blocks: a few hundred bytes of frames.
const silence = async () =>
  splitFlac(
    await lavfi('anullsrc=r=48000:cl=stereo', ['-t', '4', '-c:a', 'flac', '-frame_size', '65535', '-f', 'flac']),
  );

/** A small FLAC that says it holds 50 hours of stereo 48 kHz audio. */
async function declaresHours(): Promise<Buffer> {
  const { header, streamInfo, frames } = await silence();
  setTotalSamples(header, streamInfo, 50n * 3600n * 48_000n);
  return Buffer.concat([header, frames]);
}

describe('audio checks cost what the file is worth to a station', () => {
  let service: Service;
  let attacker: { apiKey: string; serviceId: string };
  let other: { apiKey: string; serviceId: string };
  let day: { apiKey: string; serviceId: string };

  before(
    async () => {
      // Two audio-check slots, as on a two-core host. The read through a file may take 1.5 s + 0.5 s per MB.
      service = await startService({
        UPLOAD_DECODE_BASE_MS: '1500',
        UPLOAD_PROBE_CONCURRENCY: '2',
        UPLOAD_PROBE_QUEUE: '4',
        UPLOADS_PER_SERVICE: '4',
      });
      const wallet = await buyerWallet(service);
      const buyer = async (name: string, hours = 1) => {
        const apiKey = JSON.parse((await service.cli(['keys', 'create', '--name', name])).stdout).api_key as string;
        const bought = await buy({ ...service, apiKey }, wallet, {
          product_id: 'temporary-autodj',
          email: 'dj@example.com',
          station_name: name,
          parameters: { duration_hours: hours, bitrate_kbps: 64, storage_mb: 20, listeners: 2 },
        });
        assert.equal(bought.status, 200, JSON.stringify(bought.body));
        return { apiKey, serviceId: bought.body.service.service_id as string };
      };
      attacker = await buyer('attacker');
      other = await buyer('other');
      day = await buyer('day', 24);
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
    const long = await put(attacker, 'hours.flac', await declaresHours());
    assert.equal(long.status, 422, JSON.stringify(long.body));
    assert.equal(long.body.error.code, 'audio_beyond_limits');
    assert.match(long.body.error.message, /declares 50 h of audio, longer than the 1 h this service was bought for/);

    const wide = await put(
      attacker,
      'wide.wav',
      await lavfi('anullsrc=r=8000:cl=hexadecagonal', ['-t', '0.1', '-f', 'wav']),
    );
    assert.equal(wide.body.error.code, 'audio_beyond_limits', JSON.stringify(wide.body));
    assert.match(wide.body.error.message, /16 audio channels; at most 2/);

    const fast = await put(attacker, 'fast.wav', await lavfi('anullsrc=r=384000:cl=mono', ['-t', '0.1', '-f', 'wav']));
    assert.equal(fast.body.error.code, 'audio_beyond_limits', JSON.stringify(fast.body));
    assert.match(fast.body.error.message, /384000 Hz; at most 48000/);
    assert.deepEqual(
      (await request({ ...service, apiKey: attacker.apiKey }, 'GET', `/services/${attacker.serviceId}/files`)).body
        .files,
      [],
    );
  });

  test('what no station broadcasts — more than stereo, more than 48 kHz — is refused from its header, saying how to convert it', async () => {
    // 0.2 s each: the 8-channel 192 kHz FLAC of the attack, in miniature, and a 96 kHz stereo one.
    const surround = await put(
      attacker,
      'surround.flac',
      await lavfi('anullsrc=r=48000:cl=7.1', ['-t', '0.2', '-f', 'flac']),
    );
    assert.equal(surround.status, 422, JSON.stringify(surround.body));
    assert.equal(surround.body.error.code, 'audio_beyond_limits');
    assert.match(surround.body.error.message, /8 audio channels; at most 2 .*-ac 2/);
    assert.equal(surround.body.error.retryable, false);
    assert.match(surround.body.error.request_id, /^req_/);

    const hiRes = await put(
      attacker,
      'hires.flac',
      await lavfi('anullsrc=r=96000:cl=stereo', ['-t', '0.2', '-f', 'flac']),
    );
    assert.equal(hiRes.status, 422, JSON.stringify(hiRes.body));
    assert.equal(hiRes.body.error.code, 'audio_beyond_limits');
    assert.match(hiRes.body.error.message, /96000 Hz; at most 48000 Hz .*-ar 48000/);

    const stereo = await put(
      attacker,
      'stereo.flac',
      await lavfi('sine=frequency=440:sample_rate=48000:duration=0.5', ['-ac', '2', '-f', 'flac']),
    );
    assert.equal(stereo.status, 201, JSON.stringify(stereo.body));
  });

  test('a long file is read through and decoded in windows, not decoded whole: 24 h of stereo 48 kHz is checked within the time of its 9 MB', {
    timeout: 120_000,
  }, async () => {
    // 24 h of stereo 48 kHz silence in 9 MB (padded to just above what real audio of its length may weigh): decoding
    // it whole takes about 14 s on an idle machine, beyond the 6 s allowed for 9 MB here; reading it through without
    // decoding, then decoding a few 5 s windows, takes a fraction of that.
    const long = flacSilence({ seconds: 86_400, rate: 48_000, channels: 2, sizeBytes: 9_000_000 });
    const answer = await put(day, 'day.flac', long);
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
    assert.ok(Math.abs(answer.body.file.duration_seconds - 86_400) < 5, String(answer.body.file.duration_seconds));

    // Windows are decoded from its middle and end: a file whose audio stops after its start is not taken for audio.
    const broken = Buffer.from(long);
    broken.fill(0x55, broken.length - 600_000);
    const refused = await put(day, 'broken.flac', broken);
    assert.equal(refused.status, 422, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'not_audio');
  });
});
