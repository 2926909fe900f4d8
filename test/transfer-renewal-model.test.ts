import assert from 'node:assert/strict';
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { MountMeter, type AccessLogEntry, type MountStats } from '../src/provisioning/index.js';
import type { MountUsage, ServiceRow } from '../src/services/index.js';
import { RECENT_ENDS_KEPT_MS, RecentListenerEnds } from '../src/services/recent-listener-ends.js';
import { RENEWAL_SETTLES_MS, TransferRenewals } from '../src/services/transfer-renewal.js';
import type { Database } from '../src/store/index.js';

const MOUNT = '/renewed';

/** A small deterministic generator (mulberry32), so a failure can be replayed. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function line(mount: string, endedAt: number, bytes: number, userAgent = 'player'): AccessLogEntry {
  return {
    mount,
    ip: '127.0.0.2',
    user: null,
    method: 'GET',
    kind: 'listener',
    status: 200,
    bytes,
    referer: null,
    userAgent,
    durationSeconds: 10,
    endedAt: new Date(endedAt),
    offset: 0,
    inode: null,
  };
}

const row = (offset: string, renewedAt: Date | null): ServiceRow =>
  ({ id: 'svc_model', mount: MOUNT, transfer_offset_bytes: offset, transfer_renewed_at: renewedAt }) as ServiceRow;

const usageOf = (bytesSent: number, hls: number) => ({ bytesSent, hlsBytesSent: hls }) as MountUsage;

/** A database that only takes the offsets the renewals save. */
function savingDb(): { db: Database; saved: Array<{ id: string; offset_bytes: string; renewed_at: string }> } {
  const saved: Array<{ id: string; offset_bytes: string; renewed_at: string }> = [];
  const db = {
    query: async (sql: string, params: unknown[]) => {
      assert.match(sql, /UPDATE services/);
      saved.push(...JSON.parse(params[0] as string));
      return [];
    },
  } as unknown as Database;
  return { db, saved };
}

interface Session {
  /** When the connection ended (whole seconds, as Icecast logs it) and when the meter counted its line. */
  endedAt: number;
  countedAt: number;
  bytes: number;
}

describe('the offset of a transfer renewal (model)', () => {
  test('it settles to the bytes of every connection that ended by the renewal, whenever counted, plus HLS then', async () => {
    for (let seed = 1; seed <= 200; seed++) {
      const rnd = random(seed);
      const t0 = 1_800_000_000_000;
      const renewedAt = t0 + 30_000 + Math.floor(rnd() * 1000);
      // Listeners that end around the renewal; each line is counted 0–7 s after its end (the next poll, HAProxy's wait).
      const sessions: Session[] = Array.from({ length: 1 + Math.floor(rnd() * 12) }, () => {
        const endedAt = Math.floor((renewedAt + (rnd() - 0.6) * 40_000) / 1000) * 1000;
        return { endedAt, countedAt: endedAt + Math.floor(rnd() * 7000), bytes: 1 + Math.floor(rnd() * 500_000) };
      });
      const hlsAt = (t: number) => 1000 * Math.floor(Math.max(0, t - t0) / 1000);
      const ends = new RecentListenerEnds(undefined, t0);
      const renewals = new TransferRenewals();
      const { db, saved } = savingDb();
      let finished = 0;
      const meter = {
        listenerBytesEndedBy: (_: ServiceRow, at: Date) => {
          const after = ends.endedAfter(MOUNT, at.getTime(), now);
          return after === undefined ? undefined : finished - after;
        },
      };
      // The offset the upgrade stored: the bytes counted at the last pass before it (a cut listener not among them).
      const countedBy = (t: number) => sessions.filter((s) => s.countedAt <= t).reduce((n, s) => n + s.bytes, 0);
      const stored = countedBy(renewedAt - 400) + hlsAt(renewedAt - 400);
      let service = row(String(stored), new Date(renewedAt));
      let now = t0;
      let firstSeen: number | undefined;
      for (let pass = t0; pass <= renewedAt + 20_000; pass += 250) {
        now = pass;
        const counted = sessions.filter((s) => s.countedAt > pass - 250 && s.countedAt <= pass);
        ends.record(
          counted.map((s) => line(MOUNT, s.endedAt, s.bytes)),
          pass,
        );
        finished += counted.reduce((n, s) => n + s.bytes, 0);
        if (pass < renewedAt) continue;
        firstSeen ??= pass;
        const usage = usageOf(finished + hlsAt(pass), hlsAt(pass));
        [service] = await renewals.settle(db, [service], [usage], meter, pass);
      }
      const old = sessions.filter((s) => s.endedAt <= renewedAt).reduce((n, s) => n + s.bytes, 0);
      const expected = Math.max(stored, old + hlsAt(firstSeen!));
      assert.equal(Number(service.transfer_offset_bytes), expected, `seed ${seed}`);
      if (expected > stored) assert.equal(Number(saved.at(-1)?.offset_bytes), expected, `seed ${seed}: saved`);
      for (const s of saved) assert.equal(s.renewed_at, new Date(renewedAt).toISOString());
      // The renewed allowance holds exactly the connections that ended after the renewal (and HLS served since).
      const after = sessions
        .filter((s) => s.endedAt > renewedAt && s.countedAt <= now)
        .reduce((n, s) => n + s.bytes, 0);
      const total = finished + hlsAt(now);
      if (expected > stored) assert.equal(total - expected, after + hlsAt(now) - hlsAt(firstSeen!), `seed ${seed}`);
    }
  });

  test('an offset never goes down, and a renewal older than the settling window is left as it is', async () => {
    const t0 = 1_800_000_000_000;
    const ends = new RecentListenerEnds(undefined, t0);
    ends.record([line(MOUNT, t0 + 1000, 5000)], t0 + 2000);
    const meter = { listenerBytesEndedBy: () => 5000 };
    const renewals = new TransferRenewals();
    const { db, saved } = savingDb();
    const higher = row('9000', new Date(t0 + 1500));
    assert.deepEqual(await renewals.settle(db, [higher], [usageOf(5000, 0)], meter, t0 + 3000), [higher]);
    const late = row('0', new Date(t0));
    const settled = await renewals.settle(db, [late], [usageOf(5000, 0)], meter, t0 + RENEWAL_SETTLES_MS + 1);
    assert.deepEqual(settled, [late]);
    const never = row('0', null);
    assert.deepEqual(await renewals.settle(db, [never], [usageOf(5000, 0)], meter, t0 + 3000), [never]);
    assert.equal(saved.length, 0);
  });

  test('recent ends: only listeners the meter counts, and nothing told from before what is kept', () => {
    const t0 = 1_800_000_000_000;
    const ends = new RecentListenerEnds({ isInternalAgent: (agent) => agent === 'segmenter' }, t0);
    ends.record(
      [
        line(MOUNT, t0 + 5000, 100),
        line(MOUNT, t0 + 6000, 20, 'segmenter'),
        { ...line(MOUNT, t0 + 6000, 30), status: 404 },
        { ...line(MOUNT, t0 + 6000, 40), kind: 'source' },
        line('/other', t0 + 6000, 50),
        line(MOUNT, t0 + 7000, 7),
      ],
      t0 + 8000,
    );
    assert.equal(ends.endedAfter(MOUNT, t0 + 4000, t0 + 8000), 107);
    assert.equal(ends.endedAfter(MOUNT, t0 + 5000, t0 + 8000), 7);
    assert.equal(ends.endedAfter('/other', t0 + 5000, t0 + 8000), 50);
    assert.equal(ends.endedAfter(MOUNT, t0 - 1, t0 + 8000), undefined, 'before this process counted anything');
    const later = t0 + 8000 + RECENT_ENDS_KEPT_MS + 1;
    ends.record([], later);
    assert.equal(ends.endedAfter(MOUNT, t0 + 4000, later), undefined, 'older than what is kept');
    assert.equal(ends.endedAfter(MOUNT, later - 1000, later), 0);
  });
});

describe('the count of a mount whose source and listeners are cut', () => {
  test("it does not drop between the cut and the listeners' access-log lines", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'renewal-meter-'));
    try {
      const path = join(dir, 'access.log');
      await writeFile(path, '');
      const T = Date.parse('2026-11-29T06:00:00Z');
      let live: MountStats[] = [
        {
          mount: '/m',
          listeners: 1,
          listenerPeak: 1,
          maxListeners: null,
          totalBytesSent: 40_000,
          totalBytesRead: 41_000,
          streamStart: new Date(T),
          sourceIp: '127.0.0.1',
        },
      ];
      let now = T + 10_000;
      const admin = { stats: async () => live, listClients: async () => [] };
      const meter = new MountMeter({ admin, accessLogPath: path, listClients: false, now: () => now });
      const sent = async (at: number) => {
        now = at;
        await meter.poll();
        return meter.snapshot('/m')?.bytesSent;
      };
      assert.equal(await sent(T + 10_000), 40_000, "the connected listener's share of the stats counter");
      live = [];
      assert.equal(await sent(T + 11_000), 40_000, 'cut: its share stands until its line comes');
      assert.equal(await sent(T + 12_000), 40_000);
      await appendFile(
        path,
        '127.0.0.2 - - [29/Nov/2026:06:00:11 +0000] "GET /m HTTP/1.1" 200 43210 "-" "player" 11\n',
      );
      assert.equal(await sent(T + 13_000), 43_210, 'its line: the exact bytes, counted once');
      assert.equal(await sent(T + 14_000), 43_210);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
