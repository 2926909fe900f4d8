import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { appendFile, chmod, mkdtemp, readFile, rename, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AccessLogReader,
  IcecastSupervisor,
  MountMeter,
  SourceRateMonitor,
  allowedBytesPerSecond,
  parseAccessLogLine,
  parseClfDate,
  startCallbackServer,
  type AccessLogEntry,
  type CallbackServer,
  type Decision,
  type MountDecider,
  type MountStats,
  type SourceAuthRequest,
} from '../src/provisioning/index.js';
import { exitOf, rawListener, startFfmpegSource, waitFor, type RawListener } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';

// ---------- pieces that need no Icecast ----------

const DATE = '21/Nov/2026:23:59:53 +0000';
const logLine = (
  mount: string,
  bytes: number,
  o: { agent?: string; duration?: number; status?: number; method?: string; date?: string; user?: string } = {},
) =>
  `127.0.0.1 - ${o.user ?? '-'} [${o.date ?? DATE}] "${o.method ?? 'GET'} ${mount} HTTP/1.1" ${o.status ?? 200} ${bytes} "-" "${o.agent ?? 'ua'}" ${o.duration ?? 3}\n`;
const mounts = (entries: AccessLogEntry[]) => entries.map((e) => e.mount);

describe('access log parsing', () => {
  it('parses Icecast lines and rejects others', () => {
    const e = parseAccessLogLine(
      '10.1.2.3 - bob [21/Nov/2026:23:59:53 +0100] "GET /test-abc HTTP/1.1" 200 28244 "http://r/.q." "a .quoted. agent" 3',
    );
    assert.deepEqual(e, {
      mount: '/test-abc',
      ip: '10.1.2.3',
      user: 'bob',
      method: 'GET',
      kind: 'listener',
      status: 200,
      bytes: 28244,
      referer: 'http://r/.q.',
      userAgent: 'a .quoted. agent',
      durationSeconds: 3,
      endedAt: new Date('2026-11-21T22:59:53Z'),
    });
    assert.equal(parseAccessLogLine(logLine('/m', 63, { method: 'PUT', user: 'source' }).trim())!.kind, 'source');
    assert.equal(
      parseAccessLogLine('127.0.0.1 - - [21/Nov/2026:23:59:53 +0000] "GET /m HTTP/1.0" 200 5 "-" "-" 0')!.userAgent,
      '-',
    );
    assert.equal(parseAccessLogLine(logLine('/m', 0, { method: 'HEAD' }).trim())!.kind, 'other');
    assert.equal(parseAccessLogLine('garbage'), null);
    assert.equal(
      parseAccessLogLine('127.0.0.1 - - [99/Xyz/2026:23:59:53 +0000] "GET /m HTTP/1.1" 200 5 "-" "-" 0'),
      null,
    );
    assert.equal(
      parseAccessLogLine('127.0.0.1 - - [21/Nov/2026:23:59:53 +0000] "GET /m HTTP/1.1" 200 5 "-" "-"'),
      null,
    );
    assert.equal(parseClfDate('01/Jan/2026:00:00:00 -0130')!.toISOString(), '2026-01-01T01:30:00.000Z');
  });
});

describe('access log reader on a file', () => {
  let dir: string;
  let path: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'access-log-'));
    path = join(dir, 'access.log');
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('yields complete listener lines once, across restarts, truncation and rotation', { timeout: 10_000 }, async () => {
    const reader = new AccessLogReader({ path });
    assert.deepEqual(await reader.read(), []); // no file yet

    await writeFile(
      path,
      logLine('/a', 100) +
        logLine('/admin/stats', 5) +
        'garbage\n' +
        logLine('/b', 328, { status: 401, duration: 0 }) +
        logLine('/a', 63, { method: 'PUT', user: 'source' }) +
        logLine('/status-json.xsl', 10) +
        logLine('/', 10) +
        logLine('/c', 1, { status: 404 }),
    );
    let entries = await reader.read();
    assert.deepEqual(mounts(entries), ['/a']);
    assert.equal(entries[0].bytes, 100);
    assert.equal(entries[0].offset, 0);
    assert.equal(reader.last.skipped, 7);

    // A line being written is left for later.
    const next = logLine('/d', 300);
    await appendFile(path, next.slice(0, 25));
    const before = reader.offset;
    assert.deepEqual(await reader.read(), []);
    assert.equal(reader.offset, before);
    await appendFile(path, next.slice(25));
    entries = await reader.read();
    assert.deepEqual(mounts(entries), ['/d']);
    assert.equal(entries[0].offset, before);

    // A new reader from the persisted position (or the bare offset) continues exactly there.
    const saved = JSON.parse(JSON.stringify(reader.position));
    await appendFile(path, logLine('/e', 400));
    const resumed = new AccessLogReader({ path, start: saved });
    assert.deepEqual(mounts(await resumed.read()), ['/e']);
    assert.deepEqual(mounts(await new AccessLogReader({ path, start: saved.offset }).read()), ['/e']);
    assert.deepEqual(await resumed.read(), []);

    // Rotation by rename: the rest of the old file (even an unterminated last line), then the new file.
    await appendFile(path, logLine('/f', 500) + logLine('/g', 600).trimEnd());
    await rename(path, `${path}.20261121_235953`);
    assert.deepEqual(mounts(await resumed.read()), ['/f', '/g']);
    await writeFile(path, logLine('/h', 700));
    entries = await resumed.read();
    assert.deepEqual(mounts(entries), ['/h']);
    assert.equal(resumed.last.rotated, true);
    assert.equal(entries[0].offset, 0);

    // Truncated in place: start again at 0.
    await appendFile(path, logLine('/i', 1));
    assert.deepEqual(mounts(await resumed.read()), ['/i']);
    await writeFile(path, '');
    assert.deepEqual(await resumed.read(), []);
    assert.equal(resumed.last.truncated, true);
    await appendFile(path, logLine('/j', 2));
    assert.deepEqual(mounts(await resumed.read()), ['/j']);

    // Truncated and regrown past the offset between two reads: the fingerprint notices.
    const offsetBefore = resumed.offset;
    await writeFile(
      path,
      logLine('/k', 3, { date: '22/Nov/2026:00:00:01 +0000' }) + logLine('/l', 4) + logLine('/m', 5),
    );
    assert.ok((await readFile(path)).length > offsetBefore);
    assert.deepEqual(mounts(await resumed.read()), ['/k', '/l', '/m']);
    assert.equal(resumed.last.truncated, true);

    // Rotated away and deleted before we could drain it: reported, and the new file is read. (The new
    // file may get the freed inode number back; then the fingerprint tells it apart.)
    await appendFile(path, logLine('/lost', 6));
    await rename(path, `${path}.20261122_000000`);
    await unlink(`${path}.20261122_000000`);
    await writeFile(path, logLine('/n', 7));
    assert.deepEqual(mounts(await resumed.read()), ['/n']);
    assert.ok(resumed.last.lostRotatedFile || resumed.last.truncated, JSON.stringify(resumed.last));

    // Failed requests and source lines on request. (Read as a live file, the unterminated /g line waits.)
    const all = new AccessLogReader({ path: `${path}.20261121_235953`, includeFailed: true, includeSources: true });
    assert.deepEqual(mounts(await all.read()), ['/a', '/b', '/a', '/c', '/d', '/e', '/f']);
  });
});

const T = Date.parse('2026-01-01T00:00:00Z');
const stat = (
  mount: string,
  sent: number,
  read: number,
  start: number,
  listeners = 0,
  peak = listeners,
): MountStats => ({
  mount,
  listeners,
  listenerPeak: peak,
  maxListeners: null,
  totalBytesSent: sent,
  totalBytesRead: read,
  streamStart: new Date(start),
  sourceIp: '127.0.0.1',
});

describe('mount meter without icecast', () => {
  it('accumulates per-session deltas across reconnects and restores', () => {
    const meter = new MountMeter(); // no access log: listener seconds integrated between polls
    meter.observeStats([stat('/a', 0, 0, T)], T + 1000);
    meter.observeStats([stat('/a', 1000, 5000, T, 2, 2)], T + 6000);
    meter.observeStats([stat('/a', 3000, 9000, T, 2, 3)], T + 11000);
    assert.deepEqual(
      { ...meter.snapshot('/a')!, lastSeenAt: null },
      {
        mount: '/a',
        listeners: 2,
        peakListeners: 3,
        listenerSeconds: 10,
        bytesSent: 3000,
        bytesRead: 9000,
        bytesReadEstimated: 0,
        sourceConnected: true,
        sourceSince: new Date(T).toISOString(),
        sourceSessions: 1,
        finishedListeners: 0,
        finishedListenerBytes: 0,
        lastSeenAt: null,
      },
    );
    meter.observeStats([], T + 12000); // source gone
    assert.equal(meter.snapshot('/a')!.sourceConnected, false);
    assert.equal(meter.snapshot('/a')!.listenerSeconds, 12);
    meter.observeStats([stat('/a', 500, 2000, T + 13000, 1)], T + 14000); // reconnected: counters restarted
    meter.observeStats([stat('/a', 100, 300, T + 13000, 1)], T + 15000); // reconnected within the same second
    let s = meter.snapshot('/a')!;
    // Plus what each ended session read after its last refresh, at its last measured rate: 0.8 B/ms × (11 500 − 10 250) ms
    // for the first (ended between the polls at 11 s and 12 s), 2000 B / 250 ms × (14 000 − 13 250) ms for the second.
    assert.deepEqual(
      [s.bytesSent, s.bytesRead, s.bytesReadEstimated, s.sourceSessions, s.listenerSeconds],
      [3600, 11300 + 1000 + 6000, 7000, 3, 13],
    );

    const restored = new MountMeter({ state: JSON.parse(JSON.stringify(meter.toJSON())) });
    restored.observeStats([stat('/a', 150, 400, T + 13000, 1)], T + 16000);
    s = restored.snapshot('/a')!;
    assert.deepEqual(
      [s.bytesSent, s.bytesRead, s.sourceSessions, s.listenerSeconds, s.peakListeners],
      [3650, 18400, 3, 14, 3],
    );
  });

  it('counts listener time from the access log plus connected listeners', () => {
    const meter = new MountMeter({ accessLogPath: '/nonexistent/access.log' });
    meter.observeStats([stat('/a', 0, 0, T, 2)], T + 1000);
    meter.observeClients('/a', [
      { id: '1', ip: '', userAgent: '', connectedSeconds: 30 },
      { id: '2', ip: '', userAgent: '', connectedSeconds: 5 },
    ]);
    assert.equal(meter.snapshot('/a')!.listenerSeconds, 35);
    const entry = { ...parseAccessLogLine(logLine('/a', 1234, { duration: 31 }).trim())!, offset: 0, inode: 1 };
    meter.ingest([entry, { ...entry, status: 401, offset: 99 }]);
    meter.observeClients('/a', [{ id: '2', ip: '', userAgent: '', connectedSeconds: 6 }]);
    const s = meter.snapshot('/a')!;
    assert.deepEqual(
      [s.listenerSeconds, s.listeners, s.peakListeners, s.finishedListeners, s.finishedListenerBytes],
      [37, 1, 2, 1, 1234],
    );
  });
});

/** An empty access log in a directory of its own, which the test removes. */
async function emptyAccessLog(prefix: string): Promise<{ dir: string; logPath: string }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  const logPath = join(dir, 'access.log');
  await writeFile(logPath, '');
  return { dir, logPath };
}

describe('mount meter: listclients while listeners are held', () => {
  it('asks a mount for its clients again only when they may have changed, or after the refresh time', async () => {
    const { dir, logPath } = await emptyAccessLog('meter-clients-');
    let now = T + 1000;
    let listeners = 2;
    const asked: string[] = [];
    const clients = () =>
      Array.from({ length: listeners }, (_, i) => ({
        id: String(i + 1),
        ip: '',
        userAgent: '',
        connectedSeconds: Math.round((now - T) / 1000),
      }));
    const admin = {
      stats: async () => [stat('/a', 0, 0, T, listeners), stat('/b', 0, 0, T, 0)],
      listClients: async (mount: string) => {
        asked.push(mount);
        return clients();
      },
    };
    const meter = new MountMeter({ admin, accessLogPath: logPath, now: () => now, clientsRefreshMs: 10_000 });
    try {
      let poll = await meter.poll();
      assert.deepEqual(asked, ['/a'], 'a mount without listeners is not asked');
      assert.deepEqual(
        [...poll.connected],
        [
          ['/a', ['1', '2']],
          ['/b', []],
        ],
      );
      for (let i = 0; i < 3; i++) {
        now += 1000;
        poll = await meter.poll();
      }
      assert.deepEqual(asked, ['/a'], 'the same count and no finished listener: not asked again');
      assert.equal(poll.connected.get('/a'), null, 'not listed again: nothing to reconcile');
      assert.equal(meter.snapshot('/a')!.listenerSeconds, 2 * 4, 'their seconds go on growing');

      now += 1000;
      listeners = 3;
      poll = await meter.poll();
      assert.deepEqual(asked, ['/a', '/a'], 'a listener more: asked');
      assert.deepEqual(poll.connected.get('/a'), ['1', '2', '3']);

      // One left and another came between two polls: the same count, but the one who left has its line.
      now += 1000;
      await appendFile(logPath, logLine('/a', 1000, { duration: 6 }));
      await meter.poll();
      assert.equal(asked.length, 3, "a finished listener's line: asked");

      now += 9000;
      await meter.poll();
      assert.equal(asked.length, 3);
      now += 1000;
      await meter.poll();
      assert.equal(asked.length, 4, 'asked again after the refresh time');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('mount meter with our own reader (the HLS segmenter)', () => {
  it('leaves it out of the listeners, their time and the bytes sent', () => {
    let ourBytes = 4000;
    const internal = { isInternalAgent: (ua: string) => ua === 'ours', connectedBytes: () => ourBytes };
    const meter = new MountMeter({ accessLogPath: '/nonexistent/access.log', internal });
    const ours = { id: '1', ip: '', userAgent: 'ours', connectedSeconds: 30 };
    const listener = { id: '2', ip: '', userAgent: 'ua', connectedSeconds: 5 };
    meter.observeClients('/a', [ours, listener]); // poll() reads listclients before applying the stats
    meter.observeStats([stat('/a', 5000, 9000, T, 2)], T + 1000);
    meter.observeClients('/a', [ours, listener]);
    let s = meter.snapshot('/a')!;
    assert.deepEqual([s.listeners, s.peakListeners, s.listenerSeconds, s.bytesSent], [1, 1, 5, 1000]);

    // Our reader leaves (its log line) and comes back: only the listener's bytes and time count.
    const line = (agent: string, bytes: number, duration: number) => ({
      ...parseAccessLogLine(logLine('/a', bytes, { agent, duration }).trim())!,
      offset: bytes,
      inode: 1,
    });
    const counts = (x: typeof s) => [x.listeners, x.peakListeners, x.listenerSeconds, x.bytesSent, x.finishedListeners];
    meter.ingest([line('ours', 4100, 31)]);
    ourBytes = 300;
    meter.observeStats([stat('/a', 6400, 9500, T, 2)], T + 2000);
    meter.observeClients('/a', [
      { ...ours, connectedSeconds: 1 },
      { ...listener, connectedSeconds: 6 },
    ]);
    s = meter.snapshot('/a')!;
    assert.deepEqual(counts(s), [1, 1, 6, 6400 - 4100 - 300, 0]);

    // The listener leaves: its exact log bytes, nothing of ours.
    meter.ingest([line('ua', 2050, 7)]);
    meter.observeStats([stat('/a', 6900, 9900, T, 1)], T + 3000);
    meter.observeClients('/a', [ours]);
    s = meter.snapshot('/a')!;
    assert.deepEqual(counts(s), [0, 1, 7, 2050, 1]);
  });

  it('keeps it out when polls find the listeners unchanged and do not list them again', async () => {
    const { dir, logPath } = await emptyAccessLog('meter-own-');
    let now = T + 1000;
    let listings = 0;
    const client = (id: string, userAgent: string) => ({
      id,
      ip: '',
      userAgent,
      connectedSeconds: Math.round((now - T) / 1000),
    });
    const admin = {
      stats: async () => [stat('/a', 0, 0, T, 3)], // Icecast counts our reader among its clients
      listClients: async () => {
        listings++;
        return [client('1', 'ours'), client('2', 'ua'), client('3', 'ua')];
      },
    };
    const internal = { isInternalAgent: (ua: string) => ua === 'ours', connectedBytes: () => 0 };
    const meter = new MountMeter({ admin, accessLogPath: logPath, now: () => now, internal, clientsRefreshMs: 10_000 });
    try {
      await meter.poll();
      for (let i = 0; i < 4; i++) {
        now += 1000;
        await meter.poll();
      }
      assert.equal(listings, 1, 'three clients listed, three counted: not listed again');
      const s = meter.snapshot('/a')!;
      assert.deepEqual([s.listeners, s.peakListeners, s.listenerSeconds], [2, 2, 2 * 5]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('source rate monitor without icecast', () => {
  // A source reading `rate` B/s since T; Icecast refreshes the counter every 5 s; we poll every 500 ms.
  const feed = (
    monitor: SourceRateMonitor,
    rate: number | ((s: number) => number),
    fromMs: number,
    toMs: number,
    start = T,
  ) => {
    const bytesAt = (ms: number) => {
      let total = 0;
      for (let s = 0; s < ms / 1000; s++) total += typeof rate === 'number' ? rate : rate(s);
      return total;
    };
    for (let ms = fromMs; ms <= toMs; ms += 500)
      monitor.observeMount('/x', bytesAt(Math.floor((ms - (start - T)) / 5000) * 5000), new Date(start), T + ms);
  };

  it('flags a source above 1.25× its allowance for the whole window, and nothing else', () => {
    const fast = new SourceRateMonitor();
    feed(fast, 16_000, 500, 9500);
    assert.equal(fast.overLimit('/x', 64), false, 'not before the window is covered');
    feed(fast, 16_000, 10_000, 10_000);
    assert.equal(fast.overLimit('/x', 64), true);
    assert.equal(fast.overLimit('/x', 128), false);
    assert.equal(fast.rate('/x')!.bytesPerSecond, 16_000);
    assert.deepEqual(
      fast.check({ '/x': 64, '/y': 64 }).map((o) => [o.mount, o.allowedBytesPerSecond]),
      [['/x', 10_000]],
    );
    // Stalled: the counter stops moving, the measurement goes stale.
    for (let ms = 10_500; ms <= 18_000; ms += 500) fast.observeMount('/x', 160_000, new Date(T), T + ms);
    assert.equal(fast.overLimit('/x', 64), false);
    // Reconnected: a new session starts from scratch.
    fast.observeMount('/x', 0, new Date(T + 20_000), T + 20_500);
    assert.equal(fast.rate('/x')!.bytesPerSecond, null);

    const normal = new SourceRateMonitor();
    feed(normal, 8000, 500, 30_000);
    assert.equal(normal.overLimit('/x', 64), false);
    assert.equal(normal.rate('/x')!.complete, true);

    // A burst at connect followed by the normal rate is not "the whole window".
    const burst = new SourceRateMonitor();
    feed(burst, (s) => (s < 5 ? 30_000 : 8000), 500, 20_000);
    assert.equal(burst.overLimit('/x', 64), false);
    assert.ok(allowedBytesPerSecond(64) === 10_000);

    // Watching a source that has been running for a while: the first value seen is not a measurement point.
    const late = new SourceRateMonitor();
    feed(late, 16_000, 12_000, 14_500);
    assert.equal(late.overLimit('/x', 64), false);
    feed(late, 16_000, 15_000, 15_000);
    assert.equal(late.overLimit('/x', 64), true);

    // The mount is gone from the stats: forgotten.
    late.observe([], T + 16_000);
    assert.equal(late.rate('/x'), undefined);
  });
});

// ---------- end to end with the real icecast2 and ffmpeg ----------

requireStreamingTools(['icecast2', 'ffmpeg', 'setpriv']);

const SOURCE_PASS = 'meter-pass';

/** Every /meter-* mount, one password; every listener. */
class OpenDecider implements MountDecider {
  authorizeSource(r: SourceAuthRequest): Decision {
    return r.mount.startsWith('/meter-') && r.user === 'source' && r.pass === SOURCE_PASS
      ? { accept: true }
      : { accept: false, message: 'no' };
  }
  authorizeListener(): Decision {
    return { accept: true };
  }
  listenerLeft(): void {}
  mountAdded(): void {}
  mountRemoved(): void {}
}

function startSource(port: number, mount: string, kbps: number): ChildProcess {
  return startFfmpegSource(`icecast://source:${SOURCE_PASS}@127.0.0.1:${port}${mount}`, kbps);
}

describe('metering end to end', () => {
  const processes: ChildProcess[] = [];
  const sockets: RawListener[] = [];
  let callbacks: CallbackServer;
  let supervisor: IcecastSupervisor;
  let dataDir: string;
  let meter: MountMeter;
  const monitor = new SourceRateMonitor();
  /** Raw stats per mount, as the poll loop saw them. */
  const raw = new Map<
    string,
    Array<{ at: number; totalBytesRead: number; totalBytesSent: number; streamStart: string | undefined }>
  >();
  /** MountMeter's snapshot per mount after each poll. */
  const metered = new Map<string, number[]>();
  let polls = 0;
  let polling = true;
  let pauseLoop = false;
  let loop: Promise<void>;
  const pollErrors: string[] = [];

  const source = (mount: string, kbps: number) => {
    const child = startSource(supervisor.port, mount, kbps);
    processes.push(child);
    return child;
  };
  const live = async (mount: string) =>
    waitFor(`${mount} live`, () => meter.snapshot(mount)?.sourceConnected && meter.snapshot(mount));
  const nextPolls = async (n: number) => {
    const target = polls + n;
    await waitFor(`${n} polls`, () => polls >= target);
  };

  before(
    async () => {
      dataDir = await mkdtemp(join(tmpdir(), 'metering-test-'));
      await chmod(dataDir, 0o755); // the icecast2 user must reach its data dir inside
      callbacks = await startCallbackServer({ decider: new OpenDecider() });
      supervisor = new IcecastSupervisor({
        dataDir: join(dataDir, 'icecast'),
        callbackBaseUrl: callbacks.url,
        maxClients: 50,
        maxSources: 10,
      });
      await supervisor.start();
      meter = new MountMeter({ admin: supervisor.admin, accessLogPath: supervisor.accessLogPath });
      loop = (async () => {
        while (polling) {
          if (!pauseLoop) {
            try {
              const result = await meter.poll();
              monitor.observe(result.stats, result.at);
              for (const s of result.stats) {
                const list = raw.get(s.mount) ?? [];
                list.push({
                  at: result.at,
                  totalBytesRead: s.totalBytesRead,
                  totalBytesSent: s.totalBytesSent,
                  streamStart: s.streamStart?.toISOString(),
                });
                raw.set(s.mount, list);
              }
              for (const snap of result.snapshots)
                metered.set(snap.mount, [...(metered.get(snap.mount) ?? []), snap.bytesRead]);
            } catch (error) {
              pollErrors.push(String(error));
            }
            polls++;
          }
          await sleep(250);
        }
      })();
    },
    { timeout: 20_000 },
  );

  after(async () => {
    polling = false;
    await loop;
    for (const s of sockets) s.close();
    for (const child of processes) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await supervisor?.stop();
    await callbacks?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
    assert.deepEqual(pollErrors, []);
  });

  it('counts per-listener bytes exactly from the access log, and bytes sent from the stats', {
    timeout: 30_000,
  }, async () => {
    const mount = '/meter-bytes';
    source(mount, 64);
    await live(mount);
    const a = await rawListener(supervisor.port, `${mount}?token=a`, 'meter-a');
    const b = await rawListener(supervisor.port, `${mount}?token=b`, 'meter-b');
    sockets.push(a, b);
    await waitFor(
      'both listeners streaming',
      () => a.status() === 200 && b.status() === 200 && a.received() > 30_000 && b.received() > 30_000,
    );
    await sleep(3000);
    const during = await waitFor('two connected listeners metered', () => {
      const snap = meter.snapshot(mount)!;
      return snap.listeners === 2 && snap.listenerSeconds >= 4 ? snap : undefined;
    });
    const received = { 'meter-a': a.close(), 'meter-b': b.close() };
    const closedAt = Date.now();

    const reader = new AccessLogReader({ path: supervisor.accessLogPath });
    const lines: AccessLogEntry[] = [];
    await waitFor('both access log lines', async () => {
      lines.push(...(await reader.read()).filter((e) => e.mount === mount));
      return lines.length >= 2;
    });
    const logLag = Date.now() - closedAt;
    assert.equal(lines.length, 2);
    const inFlight: number[] = [];
    for (const line of lines) {
      const got = received[line.userAgent as keyof typeof received];
      assert.ok(got !== undefined, line.userAgent);
      assert.equal(line.status, 200);
      assert.equal(line.ip, '127.0.0.1');
      assert.ok(line.durationSeconds >= 3 && line.durationSeconds <= 8, `duration ${line.durationSeconds}`);
      // Icecast counts what it wrote to the socket; what it wrote after our last read is lost with the
      // socket: at most a couple of its 1400-byte writes.
      inFlight.push(line.bytes - got);
      assert.ok(line.bytes - got >= 0 && line.bytes - got <= 2800, `log ${line.bytes} vs received ${got}`);
    }

    // Icecast refreshes total_bytes_sent every ~5 s: the meter catches up with the log within that.
    const logBytes = lines.reduce((sum, l) => sum + l.bytes, 0);
    const settled = await waitFor(
      'bytesSent to reach the log total',
      () => {
        const snap = meter.snapshot(mount)!;
        return snap.finishedListeners === 2 && snap.bytesSent >= logBytes ? snap : undefined;
      },
      10_000,
    );
    const statsLag = Date.now() - closedAt;
    console.log(
      `bytes: received ${JSON.stringify(received)}, log-received ${JSON.stringify(inFlight)} B; log line ${logLag} ms after close; ` +
        `bytesSent ${settled.bytesSent} vs log ${logBytes} after ${statsLag} ms; listenerSeconds ${during.listenerSeconds} live -> ${settled.listenerSeconds} finished`,
    );
    assert.equal(settled.bytesSent, logBytes);
    assert.equal(settled.finishedListenerBytes, logBytes);
    assert.equal(
      settled.listenerSeconds,
      lines.reduce((sum, l) => sum + l.durationSeconds, 0),
    );
    assert.ok(settled.peakListeners >= 2);
    assert.equal(settled.listeners, 0);
  });

  it('keeps bytesRead growing across a source reconnect while Icecast resets it', { timeout: 30_000 }, async () => {
    const mount = '/meter-reconnect';
    const first = source(mount, 64);
    await live(mount);
    const beforeKill = await waitFor(
      'first session counted',
      () => (meter.snapshot(mount)!.bytesRead > 0 ? meter.snapshot(mount)! : undefined),
      10_000,
    );
    const firstRaw = raw.get(mount)!.at(-1)!;
    first.kill('SIGKILL');
    await waitFor('source gone', () => !meter.snapshot(mount)!.sourceConnected);
    const countedA = meter.snapshot(mount)!.bytesRead;

    source(mount, 64);
    const second = await waitFor(
      'second session counted',
      () => {
        const snap = meter.snapshot(mount)!;
        return snap.sourceConnected && snap.sourceSessions === 2 && snap.bytesRead > countedA ? snap : undefined;
      },
      12_000,
    );
    const secondRaw = raw.get(mount)!.filter((r) => r.streamStart === second.sourceSince);
    console.log(
      `reconnect: raw total_bytes_read ${firstRaw.totalBytesRead} (session 1) then ${secondRaw
        .map((r) => r.totalBytesRead)
        .filter((v, i, all) => all.indexOf(v) === i)
        .join(', ')} (session 2); metered ${countedA} -> ${second.bytesRead}`,
    );
    assert.notEqual(second.sourceSince, beforeKill.sourceSince);
    assert.equal(secondRaw[0].totalBytesRead, 0, 'Icecast restarts total_bytes_read at 0');
    assert.ok(secondRaw.at(-1)!.totalBytesRead < second.bytesRead);
    assert.equal(second.bytesRead, countedA + secondRaw.at(-1)!.totalBytesRead);
    const series = metered.get(mount)!;
    assert.ok(
      series.every((v, i) => i === 0 || v >= series[i - 1]),
      'metered bytesRead never decreases',
    );
  });

  it('flags a source over its bitrate allowance and killSource disconnects it', { timeout: 30_000 }, async () => {
    const ok = '/meter-rate-64';
    const fast = '/meter-rate-128';
    const started = Date.now();
    source(ok, 64);
    const fastSource = source(fast, 128);
    await waitFor('over limit', () => monitor.overLimit(fast, 64), 20_000);
    const detectedMs = Date.now() - started;
    const fastRate = monitor.rate(fast)!;
    // Over a part of the window the 64 kbps source's rate is not yet known to within a fifth: stream_start has
    // whole-second precision and Icecast refreshes the counter every 5 s (one refresh in 5.4 s read 6326 B/s).
    const okRate = await waitFor(
      '64 kbps source measured over the window',
      () => {
        const rate = monitor.rate(ok);
        return rate?.complete ? rate : undefined;
      },
      15_000,
    );
    console.log(
      `rate: 128 kbps source flagged against 64 kbps ${detectedMs} ms after ffmpeg started; measured ${Math.round(fastRate.bytesPerSecond!)} B/s ` +
        `(min stretch ${Math.round(fastRate.minSegmentBytesPerSecond!)}, span ${fastRate.spanMs} ms); the 64 kbps source ${Math.round(okRate.bytesPerSecond ?? 0)} B/s ` +
        `(span ${okRate.spanMs} ms); limit ${allowedBytesPerSecond(64)} B/s`,
    );
    assert.ok(fastRate.bytesPerSecond! > 13_000 && fastRate.bytesPerSecond! < 19_000);
    assert.equal(monitor.overLimit(fast, 128), false);
    assert.equal(monitor.overLimit(ok, 64), false);
    assert.ok(okRate.bytesPerSecond! > 6_500 && okRate.bytesPerSecond! < 9_500, String(okRate.bytesPerSecond));
    assert.deepEqual(
      monitor.check({ [ok]: 64, [fast]: 64 }).map((o) => o.mount),
      [fast],
    );

    assert.equal(await supervisor.admin.killSource(fast), true);
    assert.notEqual(await exitOf(fastSource, 10_000), 0);
    await waitFor('mount gone', async () => !(await supervisor.admin.listMounts()).some((m) => m.mount === fast));
    await nextPolls(2);
    assert.equal(monitor.rate(fast), undefined);
    assert.equal(monitor.overLimit(fast, 64), false);
    assert.equal(meter.snapshot(fast)!.sourceConnected, false);
    assert.ok((await supervisor.admin.listMounts()).some((m) => m.mount === ok));
  });

  it('resumes reading the access log at a persisted position without repeating a line', {
    timeout: 20_000,
  }, async () => {
    const path = supervisor.accessLogPath;
    const first = new AccessLogReader({ path, includeFailed: true, includeSources: true });
    const seen1 = await first.read();
    const saved = JSON.parse(JSON.stringify(first.position));

    const listener = await rawListener(supervisor.port, '/meter-bytes', 'meter-restart');
    sockets.push(listener);
    await waitFor('streaming', () => listener.received() > 10_000);
    await sleep(1200);
    listener.close();

    const second = new AccessLogReader({ path, start: saved, includeFailed: true, includeSources: true });
    const seen2: AccessLogEntry[] = [];
    await waitFor('the new listener line', async () => {
      seen2.push(...(await second.read()));
      return seen2.some((e) => e.userAgent === 'meter-restart');
    });
    const all = await new AccessLogReader({ path, includeFailed: true, includeSources: true }).read();
    const id = (e: AccessLogEntry) => `${e.inode}:${e.offset}`;
    const ids1 = seen1.map(id);
    const ids2 = seen2.map(id);
    assert.equal(new Set([...ids1, ...ids2]).size, ids1.length + ids2.length, 'no line twice');
    assert.deepEqual([...ids1, ...ids2], all.map(id).slice(0, ids1.length + ids2.length), 'no line lost');
    assert.ok(seen1.length >= 2 && ids2.length >= 1, `${ids1.length} then ${ids2.length} lines`);

    // A meter restored from its JSON state counts the same, not twice.
    pauseLoop = true;
    try {
      await meter.poll(); // queued behind a poll the loop may have had in flight
      const restored = new MountMeter({
        admin: supervisor.admin,
        accessLogPath: path,
        state: JSON.parse(JSON.stringify(meter.toJSON())),
      });
      for (let attempt = 0; ; attempt++) {
        const [a, b] = [await meter.poll(), await restored.poll()];
        const sameStats =
          JSON.stringify(a.stats.map((s) => [s.totalBytesRead, s.totalBytesSent])) ===
          JSON.stringify(b.stats.map((s) => [s.totalBytesRead, s.totalBytesSent]));
        if (!sameStats && attempt < 3) continue; // Icecast refreshed its counters between the two polls
        const pick = (snaps: typeof a.snapshots) =>
          snaps.map((s) => [
            s.mount,
            s.bytesSent,
            s.bytesRead,
            s.finishedListeners,
            s.finishedListenerBytes,
            s.sourceSessions,
          ]);
        assert.deepEqual(pick(b.snapshots), pick(a.snapshots));
        assert.deepEqual(b.entries, []);
        break;
      }
    } finally {
      pauseLoop = false;
    }
  });
});
