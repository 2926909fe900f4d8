import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AutoDj,
  IcecastSupervisor,
  parseXml,
  PlayOrder,
  probeTrack,
  startCallbackServer,
  type AutoDjTrack,
  type CallbackServer,
  type MountDecider,
} from '../src/provisioning/index.js';
import { PcmPacer } from '../src/provisioning/pcm-pacer.js';
import { connectListener, hasMpegFrame, waitFor, type Listener } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { sine } from './support/tones.js';

// ---------- pieces that need no Icecast ----------

describe('autodj play order', () => {
  it('keeps the playlist order, round after round, and follows edits', () => {
    const order = new PlayOrder(false);
    const list = ['/a', '/b', '/c'];
    assert.deepEqual(
      [1, 2, 3, 4, 5].map(() => order.next(list)),
      ['/a', '/b', '/c', '/a', '/b'],
    );
    list.push('/d'); // appended mid-round: plays before the round starts again
    assert.deepEqual(
      [1, 2, 3].map(() => order.next(list)),
      ['/c', '/d', '/a'],
    );
    assert.equal(order.next([]), undefined);
  });

  it('shuffles each round into a new permutation without repeating across the seam', () => {
    let seed = 7;
    const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    const order = new PlayOrder(true, random);
    const list = ['/a', '/b', '/c', '/d', '/e'];
    const rounds = [0, 1, 2, 3].map(() => list.map(() => order.next(list)!));
    for (const round of rounds) assert.deepEqual([...round].sort(), list);
    assert.ok(new Set(rounds.map((r) => r.join())).size > 1, 'rounds differ');
    for (let i = 1; i < rounds.length; i++) assert.notEqual(rounds[i][0], rounds[i - 1].at(-1));
    assert.deepEqual(
      [1, 2, 3].map(() => order.next(['/x'])),
      ['/x', '/x', '/x'],
    );
    assert.deepEqual(
      [1, 2].map(() => order.next(['/y', '/y'])),
      ['/y', '/y'],
    );
  });
});

describe('pcm pacer', () => {
  it('writes in real time on frame boundaries, fires marks in place and fills with silence', async () => {
    const out: Buffer[] = [];
    const marks: number[] = [];
    const pacer = new PcmPacer((pcm) => out.push(pcm), {
      bytesPerSecond: 4000,
      frameBytes: 4,
      tickMs: 10,
      leadMs: 0,
      highWaterMs: 100,
    });
    const written = () => out.reduce((n, b) => n + b.length, 0);
    pacer.start();
    void pacer.push(Buffer.alloc(7, 0x11)); // a partial frame at the end of a "track"
    pacer.mark(() => marks.push(written()));
    const began = performance.now();
    await pacer.push(Buffer.alloc(1000, 0x22)); // over the high-water mark: waits for playback
    const waitedMs = performance.now() - began;
    await sleep(300);
    pacer.stop();
    const elapsedMs = performance.now() - began;
    const all = Buffer.concat(out);
    assert.ok(
      out.every((b) => b.length % 4 === 0),
      'every write is whole frames',
    );
    // Silence may come first (the clock starts at start()), but only in whole frames.
    const at = all.indexOf(0x11);
    assert.equal(at % 4, 0);
    assert.deepEqual([...all.subarray(at, at + 8)], [0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x00]);
    assert.deepEqual(marks, [at + 8]);
    assert.equal(
      all.subarray(at + 8, at + 1008).every((b) => b === 0x22),
      true,
    );
    assert.ok(waitedMs > 100, `push waited ${waitedMs} ms`);
    assert.ok(Math.abs(written() - (elapsedMs / 1000) * 4000) < 200, `${written()} bytes in ${elapsedMs} ms`);
    assert.ok(pacer.silenceBytes > 0 && all.subarray(at + 1008).every((b) => b === 0));
  });
});

// ---------- end to end with the real icecast2 and ffmpeg ----------

requireStreamingTools(['icecast2', 'ffmpeg', 'ffprobe', 'setpriv']);

const MOUNT = '/autodj-abc';
const EMPTY_MOUNT = '/autodj-empty';
const SOURCE = { user: 'source', pass: 'dj-s3cret' };
const BITRATE_KBPS = 64;

const decider: MountDecider = {
  authorizeSource: (r) => ({
    accept: [MOUNT, EMPTY_MOUNT].includes(r.mount) && r.user === SOURCE.user && r.pass === SOURCE.pass,
  }),
  authorizeListener: (r) => ({ accept: [MOUNT, EMPTY_MOUNT].includes(r.mount) }),
  listenerLeft: () => {},
  mountAdded: () => {},
  mountRemoved: () => {},
};

/** ffmpeg and ffprobe processes that are children of this test process (zombies included). */
function ffmpegChildren(): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid && /^ff(mpeg|probe)/.test(comm)) found.push(`${pid} ${comm}`);
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** CPU seconds used so far: by a process, or by this process's reaped children (the decoders). */
function cpuSeconds(pid: number | 'self-children'): number {
  const stat = readFileSync(`/proc/${pid === 'self-children' ? 'self' : pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[11..14] are utime, stime, cutime, cstime in clock ticks (100 per second on Linux).
  const [utime, stime, cutime, cstime] = fields.slice(11, 15).map(Number);
  return (pid === 'self-children' ? cutime + cstime : utime + stime) / 100;
}

/** The longest run of silence, in ms, in an MP3 stream, after its first sound. */
function longestSilenceMs(mp3: Buffer): number {
  const decoded = spawnSync(
    'ffmpeg',
    ['-loglevel', 'error', '-f', 'mp3', '-i', 'pipe:0', '-f', 's16le', '-ac', '1', '-ar', '8000', 'pipe:1'],
    {
      input: mp3,
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  const samples = new Int16Array(decoded.stdout.buffer, decoded.stdout.byteOffset, decoded.stdout.length >> 1);
  const window = 80; // 10 ms
  let heard = false;
  let run = 0;
  let longest = 0;
  for (let i = 0; i + window <= samples.length; i += window) {
    let sum = 0;
    for (let j = i; j < i + window; j++) sum += samples[j] * samples[j];
    const silent = Math.sqrt(sum / window) < 300; // the test tones have an RMS of ~2900
    if (!silent) heard = true;
    run = silent && heard ? run + 1 : 0;
    longest = Math.max(longest, run);
  }
  return longest * 10;
}

describe('AutoDJ on a real Icecast (supervisor and callbacks in the test process)', () => {
  const djs: AutoDj[] = [];
  const listeners: Listener[] = [];
  let callbacks: CallbackServer;
  let supervisor: IcecastSupervisor;
  let dataDir: string;
  let adminAuth: string;
  const files: Record<string, string> = {};
  let dj: AutoDj;
  const tracks: Array<AutoDjTrack & { at: number }> = [];
  const trackErrors: string[] = [];
  let listener: Listener;

  const sourceUrl = (mount: string) => `icecast://${SOURCE.user}:${SOURCE.pass}@127.0.0.1:${supervisor.port}${mount}`;
  const isLive = async (mount: string) => (await supervisor.admin.listMounts()).some((m) => m.mount === mount);
  /** The mount's `title` as /admin/stats shows it (IcecastAdmin.stats does not read it). */
  const statsTitle = async (mount: string) => {
    const response = await fetch(`${supervisor.baseUrl}/admin/stats?mount=${encodeURIComponent(mount)}`, {
      headers: { authorization: adminAuth },
    });
    const source = parseXml(await response.text()).children.find((e) => e.name === 'source');
    return source?.children.find((e) => e.name === 'title')?.text;
  };

  before(
    async () => {
      dataDir = await mkdtemp(join(tmpdir(), 'autodj-test-'));
      await chmod(dataDir, 0o755);
      callbacks = await startCallbackServer({ decider });
      supervisor = new IcecastSupervisor({
        dataDir: join(dataDir, 'icecast'),
        callbackBaseUrl: callbacks.url,
        maxClients: 20,
        maxSources: 4,
      });
      await supervisor.start();
      const config = parseXml(await readFile(supervisor.configPath, 'utf8'));
      const password = config.children
        .find((e) => e.name === 'authentication')!
        .children.find((e) => e.name === 'admin-password')!.text;
      adminAuth = `Basic ${Buffer.from(`${supervisor.adminUser}:${password}`).toString('base64')}`;

      // Three tones in three formats, each tagged, and one file that is not audio.
      const audio = join(dataDir, 'audio');
      await mkdir(audio);
      const make = [
        ['alpha.wav', 440, 'Ann', 'Alpha', []],
        ['bravo.mp3', 660, 'Bob', 'Bravo', ['-c:a', 'libmp3lame', '-b:a', '96k']],
        ['charlie.ogg', 880, 'Cy', 'Charlie', ['-c:a', 'libvorbis']],
        ['delta.flac', 550, 'Di', 'Delta', []],
      ] as const;
      await Promise.all(
        make.map(async ([name, hz, artist, title, codec]) => {
          files[title] = join(audio, name);
          await sine({ seconds: 2, frequency: hz, tags: { artist, title } }, [...codec], files[title]);
        }),
      );
      for (const [name, title, codec] of [
        ['echo.m4a', 'Echo', []],
        ['foxtrot.aac', 'Foxtrot', ['-f', 'adts']],
      ] as const) {
        files[title] = join(audio, name);
        await sine({ seconds: 1, frequency: 330, tags: { title } }, ['-c:a', 'aac', ...codec], files[title]);
      }
      // Stored before uploads were checked: playlists under audio names that point at another file on the disk.
      files.hls = join(audio, 'innocent.mp3');
      await writeFile(
        files.hls,
        `#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:10\n#EXTINF:10.0,\n${files.Bravo}\n#EXT-X-ENDLIST\n`,
      );
      files.concat = join(audio, 'concat.ogg');
      await writeFile(files.concat, 'ffconcat version 1.0\nfile bravo.mp3\n');
      files.junk = join(audio, 'not-audio.mp3');
      await writeFile(files.junk, 'this is not audio\n'.repeat(100));
    },
    { timeout: 20_000 },
  );

  after(async () => {
    for (const l of listeners) l.close();
    await Promise.all(djs.map((d) => d.stop()));
    await supervisor?.stop();
    await callbacks?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('reads tags from the file or from the stream, and refuses what is not audio', { timeout: 10_000 }, async () => {
    assert.deepEqual(await probeTrack(files.Alpha), { path: files.Alpha, artist: 'Ann', title: 'Alpha' });
    assert.deepEqual(await probeTrack(files.Charlie), { path: files.Charlie, artist: 'Cy', title: 'Charlie' }); // Vorbis comments
    await assert.rejects(probeTrack(files.junk));
  });

  it('plays tracks one after another on one source connection, skipping a file that is not audio', {
    timeout: 30_000,
  }, async () => {
    dj = new AutoDj({
      sourceUrl: sourceUrl(MOUNT),
      bitrateKbps: BITRATE_KBPS,
      playlist: () => [files.Alpha, files.junk, files.Bravo, files.Charlie],
      onTrack: async (t) => {
        await supervisor.admin.updateMetadata(MOUNT, `${t.artist} - ${t.title}`);
      },
    });
    djs.push(dj);
    dj.on('track', (t) => tracks.push({ ...t, at: performance.now() }));
    dj.on('trackError', ({ path }) => trackErrors.push(path));
    const began = performance.now();
    dj.start();
    await waitFor('the mount to go live', () => isLive(MOUNT));
    console.log(`mount live ${Math.round(performance.now() - began)} ms after start()`);

    listener = await connectListener(`http://127.0.0.1:${supervisor.port}${MOUNT}`);
    listeners.push(listener);
    assert.equal(listener.status, 200);
    assert.equal(listener.contentType, 'audio/mpeg');
    const [{ streamStart }] = await supervisor.admin.stats(MOUNT);
    assert.ok(streamStart);

    // Watch bytes arrive and the title change until the third track has played a while.
    const titles: string[] = [];
    let lastLength = 0;
    let lastGrowth = performance.now();
    let longestStallMs = 0;
    let silenceAtFirstTrack = 0;
    await waitFor(
      'Charlie on air',
      async () => {
        const length = listener.received().length;
        const now = performance.now();
        if (length > lastLength) [lastLength, lastGrowth] = [length, now];
        longestStallMs = Math.max(longestStallMs, now - lastGrowth);
        const title = await statsTitle(MOUNT);
        if (title && title !== titles.at(-1)) titles.push(title);
        if (tracks.length === 1 && !silenceAtFirstTrack) silenceAtFirstTrack = dj.silenceSeconds;
        const charlie = tracks.find((t) => t.title === 'Charlie');
        return charlie && now - charlie.at > 1000 && titles.includes('Cy - Charlie');
      },
      15_000,
    );

    assert.deepEqual(
      tracks.slice(0, 3).map((t) => t.title),
      ['Alpha', 'Bravo', 'Charlie'],
    );
    assert.deepEqual(trackErrors, [files.junk]);
    assert.ok(titles.includes('Bob - Bravo') && titles.includes('Cy - Charlie'), `titles seen: ${titles.join(' | ')}`);
    // Same source connection throughout, and the listener never left.
    const [after] = await supervisor.admin.stats(MOUNT);
    assert.equal(after.streamStart?.getTime(), streamStart.getTime());
    assert.equal((await supervisor.admin.listClients(MOUNT)).length, 1);
    assert.ok(longestStallMs < 1000, `bytes stopped for ${Math.round(longestStallMs)} ms`);
    assert.ok(hasMpegFrame(listener.received()));

    const changes = tracks.slice(1, 3).map((t, i) => Math.round(t.at - tracks[i].at));
    const silenceDuringTracks = dj.silenceSeconds - silenceAtFirstTrack;
    const heardGapMs = longestSilenceMs(listener.received());
    console.log(
      `track starts ${changes.join(' / ')} ms apart (2000 ms tracks); silence inserted after the first track started: ${Math.round(silenceDuringTracks * 1000)} ms; longest silence a listener heard: ${heardGapMs} ms; listener bytes never paused over ${Math.round(longestStallMs)} ms`,
    );
    assert.ok(silenceDuringTracks < 0.05, `decoders fell behind: ${silenceDuringTracks} s of silence`);
    assert.ok(heardGapMs <= 100, `a ${heardGapMs} ms gap`);
  });

  it('sends at the bought bitrate', { timeout: 30_000 }, async () => {
    // Icecast refreshes total_bytes_read about every 5 s: measure between two refreshes.
    const refreshes: Array<{ at: number; bytes: number; heard: number; encoderCpu: number; childrenCpu: number }> = [];
    const nodeCpuBefore = process.cpuUsage();
    const encoderPid = dj.encoderPid!;
    let previous = (await supervisor.admin.stats(MOUNT))[0].totalBytesRead;
    await waitFor(
      'two stats refreshes 4 s apart',
      async () => {
        const [{ totalBytesRead }] = await supervisor.admin.stats(MOUNT);
        if (totalBytesRead !== previous) {
          previous = totalBytesRead;
          refreshes.push({
            at: performance.now(),
            bytes: totalBytesRead,
            heard: listener.received().length,
            encoderCpu: cpuSeconds(encoderPid),
            childrenCpu: cpuSeconds('self-children'),
          });
        }
        return refreshes.length >= 2 && refreshes.at(-1)!.at - refreshes[0].at >= 4000;
      },
      20_000,
    );
    const [first, last] = [refreshes[0], refreshes.at(-1)!];
    const seconds = (last.at - first.at) / 1000;
    const readPerSecond = (last.bytes - first.bytes) / seconds;
    const heardPerSecond = (last.heard - first.heard) / seconds;
    const nodeCpu = process.cpuUsage(nodeCpuBefore);
    console.log(
      `over ${seconds.toFixed(1)} s: icecast read ${Math.round(readPerSecond)} B/s, a listener got ${Math.round(heardPerSecond)} B/s (${BITRATE_KBPS} kbps = ${BITRATE_KBPS * 125} B/s); ` +
        `CPU: encoder ${((100 * (last.encoderCpu - first.encoderCpu)) / seconds).toFixed(1)}%, decoders+ffprobe ${((100 * (last.childrenCpu - first.childrenCpu)) / seconds).toFixed(1)}%, ` +
        `this node process (test polling included) ${(((nodeCpu.user + nodeCpu.system) / 1e4 / (performance.now() - first.at + 1)) * 1000).toFixed(1)}%`,
    );
    const expected = BITRATE_KBPS * 125;
    assert.ok(Math.abs(readPerSecond - expected) / expected < 0.25, `${readPerSecond} B/s read`);
    assert.ok(Math.abs(heardPerSecond - expected) / expected < 0.25, `${heardPerSecond} B/s heard`);
  });

  it('restarts the encoder when the admin API kills the source', { timeout: 20_000 }, async () => {
    const oldPid = dj.encoderPid;
    const exited = once(dj, 'encoderExited');
    const restarted = once(dj, 'restarted');
    const began = performance.now();
    assert.equal(await supervisor.admin.killSource(MOUNT), true);
    const [exit] = await exited;
    assert.equal(exit.pid, oldPid);
    const exitedMs = Math.round(performance.now() - began);
    const [{ pid, attempt }] = await restarted;
    assert.notEqual(pid, oldPid);
    assert.equal(attempt, 1);
    await waitFor('the mount to be live again', () => isLive(MOUNT));
    console.log(
      `after killsource: encoder exited in ${exitedMs} ms (code ${exit.code}: ${exit.stderr.split('\n').at(-1)}), mount live again after ${Math.round(performance.now() - began)} ms`,
    );
    await listener.ended; // killsource drops the listeners too
  });

  it('reconnects after icecast itself restarts', { timeout: 20_000 }, async () => {
    const icecastBack = once(supervisor, 'restarted');
    const encoderExited = once(dj, 'encoderExited');
    const began = performance.now();
    process.kill(supervisor.pid!, 'SIGKILL');
    await encoderExited;
    const [{ startMs }] = await icecastBack;
    const icecastMs = Math.round(performance.now() - began);
    await waitFor('the mount to be live again', () => isLive(MOUNT), 15_000);
    console.log(
      `icecast SIGKILLed: back after ${icecastMs} ms (${startMs} ms to answer), mount live again after ${Math.round(performance.now() - began)} ms`,
    );
  });

  it('stops and starts quickly, leaving no ffmpeg behind', { timeout: 20_000 }, async () => {
    const began = performance.now();
    await dj.stop();
    const stoppedMs = Math.round(performance.now() - began);
    assert.deepEqual(ffmpegChildren(), []);
    await waitFor('the mount to be free', async () => !(await isLive(MOUNT)));
    const freeMs = Math.round(performance.now() - began);

    const playedBefore = tracks.length;
    const restartedAt = performance.now();
    dj.start();
    await waitFor('the mount to be live again', () => isLive(MOUNT));
    const liveMs = Math.round(performance.now() - restartedAt);
    await waitFor('a track to start', () => tracks.length > playedBefore);
    const resumed = tracks[playedBefore];
    const expectedNext =
      [files.Alpha, files.Bravo, files.Charlie][
        [files.Alpha, files.Bravo, files.Charlie].indexOf(tracks[playedBefore - 1].path) + 1
      ] ?? files.Alpha;
    assert.equal(resumed.path, expectedNext, 'resumes with the next track');
    console.log(
      `stop() resolved in ${stoppedMs} ms, mount free ${freeMs} ms after stop(); after start() live in ${liveMs} ms, first track after ${Math.round(resumed.at - restartedAt)} ms`,
    );

    await dj.stop();
    assert.deepEqual(ffmpegChildren(), []);
  });

  it('keeps an empty playlist on air with silence until a file appears', { timeout: 20_000 }, async () => {
    const playlist: string[] = [];
    const empty = new AutoDj({
      sourceUrl: sourceUrl(EMPTY_MOUNT),
      bitrateKbps: 32,
      playlist: async () => [...playlist],
      shuffle: true,
    });
    djs.push(empty);
    const played: string[] = [];
    empty.on('track', (t) => played.push(t.title ?? ''));
    empty.start();
    await waitFor('the empty mount to go live', () => isLive(EMPTY_MOUNT));
    const silent = await connectListener(`http://127.0.0.1:${supervisor.port}${EMPTY_MOUNT}`);
    listeners.push(silent);
    await sleep(1500);
    const [{ streamStart }] = await supervisor.admin.stats(EMPTY_MOUNT);
    assert.deepEqual(played, []);
    assert.ok(silent.received().length > 2000, `${silent.received().length} bytes of silence`);
    assert.ok(empty.silenceSeconds > 1);

    playlist.push(files.Delta);
    const addedAt = performance.now();
    await waitFor('the new file to play', () => played.length > 0, 5000);
    console.log(`a file added to an empty playlist started ${Math.round(performance.now() - addedAt)} ms later`);
    assert.deepEqual(played, ['Delta']);
    assert.equal((await supervisor.admin.stats(EMPTY_MOUNT))[0].streamStart?.getTime(), streamStart?.getTime());
    await empty.stop();
    assert.deepEqual(ffmpegChildren(), []);
  });

  it('plays M4A and ADTS AAC, and never follows a playlist stored under an audio name', {
    timeout: 30_000,
  }, async () => {
    await assert.rejects(probeTrack(files.hls), /playlist/);
    await assert.rejects(probeTrack(files.concat), /playlist/);
    const guarded = new AutoDj({
      sourceUrl: sourceUrl(MOUNT),
      bitrateKbps: 32,
      playlist: () => [files.hls, files.concat, files.Echo, files.Foxtrot],
    });
    djs.push(guarded);
    const played: AutoDjTrack[] = [];
    const refused: string[] = [];
    guarded.on('track', (t) => played.push(t));
    guarded.on('trackError', ({ path }) => refused.push(path));
    guarded.start();
    await waitFor('Echo and Foxtrot to play', () => played.some((t) => t.path === files.Foxtrot), 15_000);
    await guarded.stop();
    assert.deepEqual(
      played.slice(0, 2).map((t) => t.path),
      [files.Echo, files.Foxtrot],
    );
    assert.equal(played[0].title, 'Echo');
    assert.ok(!played.some((t) => t.title === 'Bravo'), `the playlists' target played: ${JSON.stringify(played)}`);
    assert.deepEqual(refused.slice(0, 2), [files.hls, files.concat]);
  });

  it('starts each track decoder beside its probe, and keeps what the decoder wrote before the probe answered', {
    timeout: 30_000,
  }, async () => {
    // Each wrapper takes 1.2 s to start its tool: a track change that waits for the probe and then the decoder takes
    // longer than the 2 s of the previous track queued, one that runs them side by side does not.
    const slow = async (tool: string) => {
      const path = join(dataDir, `slow-${tool}`);
      await writeFile(path, `#!/bin/sh\nsleep 1.2\nexec ${tool} "$@"\n`, { mode: 0o755 });
      return path;
    };
    const slowDj = new AutoDj({
      sourceUrl: sourceUrl(MOUNT),
      bitrateKbps: 32,
      playlist: () => [files.Alpha, files.Bravo, files.Echo],
      ffmpeg: await slow('ffmpeg'),
      ffprobe: await slow('ffprobe'),
    });
    djs.push(slowDj);
    const played: string[] = [];
    const refused: string[] = [];
    let silenceAtFirstTrack = 0;
    slowDj.on('track', (t) => {
      if (played.length === 0) silenceAtFirstTrack = slowDj.silenceSeconds;
      played.push(t.title ?? '');
    });
    slowDj.on('trackError', ({ path }) => refused.push(path));
    slowDj.start();
    await waitFor('Echo to play', () => played.includes('Echo'), 15_000);
    const silence = slowDj.silenceSeconds - silenceAtFirstTrack;
    console.log(`silence between tracks: ${Math.round(silence * 1000)} ms`);
    await slowDj.stop();
    assert.deepEqual(played.slice(0, 3), ['Alpha', 'Bravo', 'Echo']);
    assert.deepEqual(refused, []);
    // Run one after the other, the probe and the decoder leave about 0.7 s of silence at each change.
    assert.ok(silence < 0.25, `${silence} s of silence between tracks`);
  });
});
