import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../src/log/index.js';
import type { IcecastAdmin } from '../src/provisioning/index.js';
import { AutoDjManager, type MediaLibrary, type ServiceRow } from '../src/services/index.js';
import type { Database } from '../src/store/index.js';
import { requireStreamingTools } from './support/system-tools.js';

// The host reconciler and the life-cycle pass both sync AutoDJs. A pass reads its services when it begins and syncs
// at its end: a service bought meanwhile, whose AutoDJ the reconciler started, is not in its list. Stopped there, the
// AutoDJ began again a pass later (its listeners heard the playlist start over).
requireStreamingTools();

function autodjService(id: string): ServiceRow {
  return {
    id,
    status: 'active',
    product_id: 'temporary-autodj',
    mount: `/live-${id}`,
    source_password: 'secret',
    shuffle: false,
    limits: { bitrate_kbps: 64, autodj: true },
  } as unknown as ServiceRow;
}

test('a sync from an old read neither stops a new AutoDJ nor starts one of an ended service', async () => {
  const started: string[] = [];
  const log: Logger = {
    info: (fields, message) => void (message === 'AutoDJ started' && started.push(String(fields.service_id))),
    warn: () => {},
    error: () => {},
  };
  // What PostgreSQL holds active: asked before a sync with an old read starts an AutoDJ.
  const activeInDatabase = new Set(['svc_older', 'svc_bought']);
  const db = {
    query: async (sql: string, [ids]: [string[]]) =>
      sql.includes("status = 'active'") ? ids.filter((id) => activeInDatabase.has(id)).map((id) => ({ id })) : [],
  } as unknown as Database;
  const media = { list: async () => [], pathOf: (_id: string, name: string) => name } as unknown as MediaLibrary;
  // Nothing listens on port 9: the encoders fail and are started again, which this test does not look at.
  const djs = new AutoDjManager({ db, media, icecastUrl: () => 'http://127.0.0.1:9', admin: () => undefined, log });
  const older = autodjService('svc_older');
  const bought = autodjService('svc_bought');
  try {
    await djs.sync([older, bought]); // the reconciler, woken by the purchase
    await djs.sync([older], new Set([older.id])); // a life-cycle pass that read before the purchase
    await djs.sync([older, bought]);
    assert.deepEqual(started, ['svc_older', 'svc_bought'], 'the bought service kept its first AutoDJ');

    await djs.sync([older], new Set([older.id, bought.id])); // a pass that read it, and read it ended
    await djs.sync([older]); // the reconciler, which reads every service
    await djs.sync([older, bought]);
    assert.deepEqual(started, ['svc_older', 'svc_bought', 'svc_bought'], 'one it read ended was stopped');

    // The owner stops the bought service: the reconciler stops its AutoDJ; a pass that read it active does not
    // start it again, the database says it has ended.
    activeInDatabase.delete(bought.id);
    await djs.sync([older]);
    await djs.sync([older, bought], new Set([older.id, bought.id]));
    assert.equal(started.length, 3, `a pass with an old read started no AutoDJ for an ended service: ${started}`);
    // The life-cycle pass still starts what the database has active (an AutoDJ handed back by a live encoder).
    activeInDatabase.add(bought.id);
    await djs.sync([older, bought], new Set([older.id, bought.id]));
    assert.deepEqual(started.slice(3), ['svc_bought']);
  } finally {
    await djs.stopAll();
  }
});

test("a yield takes the mount from AutoDJ when Icecast is slow to read AutoDJ's hang-up, and keeps the turn", async () => {
  const log: Logger = { info: () => {}, warn: () => {}, error: () => {} };
  const db = { query: async () => [] } as unknown as Database;
  const media = { list: async () => [], pathOf: (_id: string, name: string) => name } as unknown as MediaLibrary;
  const service = autodjService('svc_slow');
  // An Icecast that still lists AutoDJ's source on the mount until it is told to kill it, and then reports the mount
  // freed (its callback), while the live encoder still waits on the decision.
  // Its answers are slow then (a loaded host): the news of the freed mount is read after the yield has ended.
  const killed: string[] = [];
  let freed: Promise<void> | undefined;
  const admin = {
    listMounts: async () => {
      if (!killed.length) return [{ mount: service.mount }];
      await sleep(400);
      return [];
    },
    killSource: async (mount: string) => {
      killed.push(mount);
      setTimeout(() => (freed = djs.mountFreed(service.id, mount)), 100);
      return true;
    },
  } as unknown as IcecastAdmin;
  const djs = new AutoDjManager({ db, media, icecastUrl: () => 'http://127.0.0.1:9', admin: () => admin, log });
  try {
    await djs.sync([service]);
    const asked = Date.now();
    await djs.yieldTo(service);
    assert.deepEqual(killed, [service.mount], 'the mount AutoDJ still held was taken from it');
    assert.ok(Date.now() - asked < 6000, 'the live encoder was answered within its wait');
    await sleep(200);
    await freed;
    assert.equal(djs.isLive(service.id), true, "the mount freed by the kill was AutoDJ's own, not the live one's");
  } finally {
    await djs.stopAll();
  }
});
