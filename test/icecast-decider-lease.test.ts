import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Logger } from '../src/log/index.js';
import { IcecastDecider } from '../src/services/index.js';
import type { Database } from '../src/store/index.js';

const quiet: Logger = { info() {}, warn() {}, error() {} };

/** A database cut off by a partition: every query fails (in a real partition it hangs). Counts what was asked. */
function partitionedDatabase() {
  const asked: string[] = [];
  const cutOff = (sql: string) => {
    asked.push(sql);
    return Promise.reject(new Error('PostgreSQL is cut off'));
  };
  const db = { query: cutOff, transaction: () => cutOff('transaction'), dedicated: () => cutOff('dedicated') };
  return { db: db as unknown as Database, asked };
}

// Icecast closes a listener it dropped only once that listener's callback is answered: a host that lost its lease
// (and may be cut off from PostgreSQL) answers every callback at once, without a query.
test('without its lease, every Icecast callback is answered from memory, without the database', async () => {
  let leaseLost = true;
  const { db, asked } = partitionedDatabase();
  const decider = new IcecastDecider({ db, log: quiet, hostId: () => 'host-c', leaseLost: () => leaseLost });
  const mount = '/partitioned';
  const source = await decider.authorizeSource({ mount, user: 'source', pass: 'pw' });
  assert.equal(source.accept, false);
  assert.match(source.message!, /lost touch with the pool/);
  const listener = await decider.authorizeListener({
    mount,
    query: {},
    clientId: '7',
    ip: '127.0.0.1',
    userAgent: 'test',
    user: '',
    pass: '',
  });
  assert.equal(listener.accept, false);
  await decider.listenerLeft({ mount, clientId: '7' });
  await decider.mountAdded({ mount });
  await decider.mountRemoved({ mount });
  assert.deepEqual(asked, [], 'no query');

  // With its lease the same callback reads PostgreSQL (whether the service is still on this host); when PostgreSQL
  // does not answer, it is still answered, going by the source this host let in (none here).
  leaseLost = false;
  await decider.mountRemoved({ mount });
  assert.equal(asked.length, 1);
});
