import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { SourceEventGate } from '../src/events/index.js';
import type { Logger } from '../src/log/index.js';
import { IcecastDecider } from '../src/services/index.js';
import { migrate } from '../src/store/index.js';
import { embeddedDatabase } from './support/database.js';
import { waitFor } from './support/streaming.js';

const store = embeddedDatabase('audio-source-events-');
const quiet: Logger = { info() {}, warn() {}, error() {} };
const SERVICE = 'svc_flapping_source';
const MOUNT = '/flapping';

const sourceEvents = () =>
  store.db
    .query<{ type: string }>(`SELECT type FROM events WHERE service_id = $1 ORDER BY seq`, [SERVICE])
    .then((rows) => rows.map((r) => r.type));

describe('source events', () => {
  before(async () => {
    await migrate(store.db);
    await store.db.transaction(async (client) => {
      await client.query('SET LOCAL session_replication_role = replica'); // no orders or keys needed for this row
      await client.query(
        `INSERT INTO services (id, order_id, api_key_id, product_id, status, mount, source_user, source_password, limits)
         VALUES ($1, $1, 'key_source', 'instant-stream', 'active', $2, 'source', 'pw', '{}')`,
        [SERVICE, MOUNT],
      );
    });
  });

  test('a source that reconnects over and over records one connect/disconnect pair per window, then its latest state', async () => {
    const gate = new SourceEventGate(store.db, 3);
    const decider = new IcecastDecider({ db: store.db, log: quiet, sourceEvents: gate });
    for (let i = 0; i < 5; i++) {
      await decider.mountAdded({ mount: MOUNT });
      await decider.mountRemoved({ mount: MOUNT });
    }
    await decider.mountAdded({ mount: MOUNT }); // the source is connected in the end
    assert.deepEqual(
      await sourceEvents(),
      ['source.connected', 'source.disconnected'],
      '11 callbacks, one pair recorded',
    );

    await waitFor('the held state to be recorded when the window ends', async () => (await gate.flush()) > 0, 15_000);
    assert.deepEqual(await sourceEvents(), ['source.connected', 'source.disconnected', 'source.connected']);
    await decider.mountAdded({ mount: MOUNT });
    assert.equal(await gate.flush(), 0);
    assert.equal((await sourceEvents()).length, 3, 'the state already recorded is not recorded again');
  });
});
