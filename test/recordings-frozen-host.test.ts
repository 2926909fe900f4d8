import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { buy } from './support/purchase.js';
import { request, scratchDir, type Service, startService } from './support/service.js';
import { setIcecastTitle } from './support/icecast-title.js';
import { descendantsOf } from './support/processes.js';
import { exitOf, listenWhenLive, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { liveToneSource, playedSeconds } from './support/tones.js';
import { TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';

// A streaming host that freezes (SIGSTOP: a stalled VM, not a crash) while it records a show, and wakes up after
// the service moved and the show went on on another host. Its Icecast and its capture wake a little before serve
// does, as a resumed machine's processes do: the capture writes what it still had of the old session. None of it
// may reach the show the new host continues: the recording plays what the old host had before it froze, then the
// new host's part, and nothing after.
requireStreamingTools(['icecast2', 'ffmpeg']);
const DOWN_AFTER_SECONDS = 3;
const pool = {
  HOST_DOWN_AFTER_SECONDS: String(DOWN_AFTER_SECONDS),
  HOST_HEARTBEAT_MS: '500',
  LIFECYCLE_INTERVAL_MS: '250',
  WEBHOOK_SECRETS_KEY: randomBytes(32).toString('base64'),
  // A show's gap outlasts the move to the other host and the source's return there (3–4 s), and after A's part the
  // 9 s in which B wakes and writes, with room for a loaded machine (20 s left B's capture a second file under load):
  // the show is still open when B's serve wakes.
  RECORDING_GAP_SECONDS: '30',
};
/** The longest an MPEG audio frame can be (layer II or III, 384 kbps at 32 kHz, padded). */
const LARGEST_MP3_FRAME = 1_729;
/** The wait for a show's end after its last source: a service that ignored the gap (production's minute) fails it. */
const SHOW_END_MS = 55_000;
const BACK_SECONDS = 8;

let a: Service;
let b: Service;
let wallet: TestWallet;
let mediaDir: string;
const children: ChildProcess[] = [];
const frozen: number[] = [];

const owner = (serviceId: string, method: string, path: string, body?: unknown) =>
  request({ baseUrl: a.baseUrl, apiKey: a.apiKey }, method, `/services/${serviceId}${path}`, { body });
const keep = (child: ChildProcess) => {
  children.push(child);
  return child;
};
const recordingsOf = async (serviceId: string) => (await owner(serviceId, 'GET', '/recordings')).body.recordings;

/** The bytes of every file recordings have in a service's media directory. */
async function recordingBytes(dir: string): Promise<number> {
  const names = (await readdir(dir)).filter((name) => name.startsWith('.recording-'));
  const sizes = await Promise.all(names.map(async (name) => (await stat(join(dir, name))).size));
  return sizes.reduce((sum, size) => sum + size, 0);
}

/**
 * The model of a show's titles: each title announced while it recorded (now playing's history), once, in order; a
 * title is one announcement (its start), so a song played twice is there twice, a title told twice is not.
 */
function assertTitlesOfShow(titles: Array<{ title: string; started_at: string }>, history: typeof titles): void {
  const starts = titles.map((t) => t.started_at);
  assert.equal(new Set(starts).size, starts.length, `each announcement once: ${JSON.stringify(titles)}`);
  const announced = [...history].reverse().filter((t) => starts.includes(t.started_at));
  assert.deepEqual(
    titles.map((t) => [t.title, t.started_at]),
    announced.map((t) => [t.title, t.started_at]),
  );
}

const signal = (pids: number[], name: NodeJS.Signals) => {
  for (const pid of pids) {
    try {
      process.kill(pid, name);
    } catch {
      // gone meanwhile
    }
  }
};

before(async () => {
  mediaDir = await scratchDir('recordings-frozen-');
  a = await startService({ ...pool, MEDIA_DIR: mediaDir, STREAMING_HOST_ID: 'host-a' });
  const lock = JSON.parse(await readFile(join(a.dataDir, 'serve.lock'), 'utf8'));
  const dev = await devFile(a.dataDir);
  wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  b = await startService({
    ...pool,
    MEDIA_DIR: mediaDir,
    DATABASE_URL: lock.database_url,
    CHAIN_RPC_URL: dev.chain.rpc_url,
    DEV_FACILITATOR_ACCOUNT: '4',
    STREAMING_HOST_ID: 'host-b',
  });
});

after(async () => {
  signal(frozen, 'SIGCONT');
  for (const child of children) child.kill('SIGKILL');
  await b?.stop('SIGKILL');
  await a?.stop();
});

/** A recording service placed on host B, its show recording there from a source that sends 440 Hz. */
async function recordingOnB() {
  const cli = async (args: string[]) => assert.equal((await a.cli(args)).code, 0);
  await cli(['hosts', 'drain', 'host-a']);
  const bought = await buy({ baseUrl: a.baseUrl, apiKey: a.apiKey }, wallet, {
    product_id: 'event-stream',
    email: 'owner@example.com',
    station_name: 'Frozen Radio',
    parameters: { duration_hours: 2, max_listeners: 5, bitrate_kbps: 64, recording: true },
  });
  assert.equal(bought.status, 200, JSON.stringify(bought.body));
  await cli(['hosts', 'undrain', 'host-a']);
  const svc = bought.body.service;
  const startedAt = Date.now();
  const source = keep(liveToneSource(svc.broadcast_url, 120, 440));
  (await listenWhenLive(svc.stream_url, 30_000)).close();
  await waitFor('B records the show', async () => (await recordingsOf(svc.service_id))[0]?.size_bytes > 0);
  const set = await owner(svc.service_id, 'PUT', '/now-playing', { title: 'On B' });
  assert.equal(set.status, 200, JSON.stringify(set.body));
  await waitFor('B records the show and its title', async () => {
    const [show] = await recordingsOf(svc.service_id);
    return show?.size_bytes > 24_000 && show.titles.length === 1;
  }).catch(async (err: Error) => {
    const said = b
      .output()
      .split('\n')
      .filter((line) => /record|capture|"level":"(warn|error)"/i.test(line));
    const shows = JSON.stringify(await recordingsOf(svc.service_id));
    throw new Error(`${err.message}: ${shows}\n${said.slice(-10).join('\n')}`);
  });
  return { svc, source, startedAt };
}

describe('a frozen host that wakes up after its show moved', () => {
  test('writes nothing into the show the new host continues', { timeout: 300_000 }, async () => {
    const { svc, source, startedAt } = await recordingOnB();
    const hostProcesses = descendantsOf(b.process.pid!).map((p) => p.pid);
    assert.ok(hostProcesses.length >= 2, 'B runs Icecast and the capture');
    frozen.push(b.process.pid!, ...hostProcesses);
    signal(frozen, 'SIGSTOP');
    const beforeFreeze = (Date.now() - startedAt) / 1000;

    const moved = await waitFor(
      'the service to move to host A',
      async () => {
        const read = (await owner(svc.service_id, 'GET', '')).body;
        return new URL(read.service.broadcast_url).host !== new URL(svc.broadcast_url).host && read;
      },
      (DOWN_AFTER_SECONDS + 30) * 1000,
    );
    // The owner starts an encoder on A; the first one is still connected to the frozen host, its audio waiting in
    // B's sockets (killed, it would reset the connection and Icecast would drop what it had not read).
    const again = keep(liveToneSource(moved.service.broadcast_url, BACK_SECONDS, 880));
    (await listenWhenLive(moved.service.stream_url, 30_000)).close();
    const set = await owner(svc.service_id, 'PUT', '/now-playing', { title: 'On A' });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.equal(await exitOf(again, (BACK_SECONDS + 30) * 1000), 0, 'the encoder sent its show on host A');
    await sleep(3000); // A's capture ends with its source

    const showDir = join(mediaDir, svc.service_id);
    const beforeWaking = await recordingBytes(showDir);
    signal(hostProcesses, 'SIGCONT');
    // B's Icecast still has the first encoder's mount: a title set there now is one B's serve has never seen when it
    // wakes. It is not news of the service, which plays on A.
    await setIcecastTitle(b, new URL(svc.stream_url).pathname, 'Stale on B');
    await sleep(3000);
    signal([b.process.pid!], 'SIGCONT');
    frozen.length = 0;
    await sleep(3000);
    const woken = await recordingBytes(showDir);
    source.kill('SIGKILL');
    // B's capture writes what it still held when it wakes (and as serve ends it): the scenario is reproduced.
    console.log(`recording files before B woke: ${beforeWaking} bytes; after: ${woken}`);
    assert.ok(woken > beforeWaking, 'B wrote on after it woke');

    const show = await waitFor(
      'the show to end the gap after its last source',
      async () => {
        const items = await recordingsOf(svc.service_id);
        return items.length === 1 && items[0].status === 'complete' && items[0];
      },
      SHOW_END_MS,
    );
    assert.equal(show.source_sessions, 2, 'one show over two hosts');
    // Each part is joined up to its last whole frame: a capture can end inside one.
    assert.ok(
      show.size_bytes <= beforeWaking && beforeWaking - show.size_bytes < 2 * LARGEST_MP3_FRAME,
      `B's part as it was when A took the show over, and A's part: ${show.size_bytes} of ${beforeWaking} bytes`,
    );
    const history = (await request(a, 'GET', `/listen/${svc.service_id}/now-playing`)).body.listen?.history;
    assert.deepEqual(
      show.titles.map((t: { title: string }) => t.title),
      ['On B', 'On A'],
      `${JSON.stringify(show.titles)}; now playing: ${JSON.stringify(history)}`,
    );
    assert.deepEqual(
      history.map((t: { title: string }) => t.title),
      ['On A', 'On B'],
      'the woken host told nothing of a service it no longer has',
    );
    assertTitlesOfShow(show.titles, history);
    const bytes = Buffer.from(await (await fetch(show.download_url)).arrayBuffer());
    assert.equal(bytes.length, show.size_bytes);
    const played = await playedSeconds(show.download_url);
    assert.ok(Math.abs(played - show.duration_seconds) <= 0.5, `${show.duration_seconds} s, plays ${played}`);
    assert.ok(played >= 3 + BACK_SECONDS - 1, `B's part and A's (${played} s)`);
    assert.ok(
      played <= beforeFreeze + BACK_SECONDS + 1,
      `nothing B wrote after it froze (${played} s; ${beforeFreeze.toFixed(1)} s before the freeze, ${BACK_SECONDS} s on A)`,
    );
    const files = (await readdir(join(mediaDir, svc.service_id))).filter((f) => f.startsWith('.recording-'));
    assert.equal(files.length, 1, `one file for the show: ${files.join(', ')}`);
  });
});
