import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { request, startService, type Service } from './support/service.js';
import { waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { connectDatabase } from './support/serve-lock.js';
import { boughtService } from './support/live-stream.js';

requireStreamingTools(['icecast2']);

// track.changed: an owner who sets titles as fast as its key allows stores one event per service per 5 s window (the
// latest title, sent when the window ends), and a service keeps at most 200 of them.
describe('track.changed is coalesced per service and its history capped', () => {
  let service: Service;
  let serviceId: string;
  let db: pg.Client;

  before(
    async () => {
      service = await startService();
      serviceId = (
        await boughtService(service, {
          product_id: 'instant-stream',
          email: 'owner@example.com',
          station_name: 'Burst FM',
          parameters: { duration_hours: 1, max_listeners: 5, bitrate_kbps: 64 },
        })
      ).service_id;
      db = await connectDatabase(service);
    },
    { timeout: 180_000 },
  );
  after(async () => {
    await db?.end();
    await service?.stop();
  });

  const trackEvents = async () =>
    (
      await db.query<{ title: string; previous: string | null }>(
        `SELECT data->>'title' AS title, data->>'previous' AS previous FROM events
          WHERE service_id = $1 AND type = 'track.changed' ORDER BY seq`,
        [serviceId],
      )
    ).rows;
  const setTitle = (title: string) =>
    request(service, 'PUT', `/services/${serviceId}/now-playing`, { body: { title } });

  test('a burst of 40 titles stores a few events, and the last title is sent when the window ends', {
    timeout: 60_000,
  }, async () => {
    const started = Date.now();
    for (let i = 1; i <= 40; i++) {
      const set = await setTitle(`Burst ${i}`);
      assert.equal(set.status, 200, JSON.stringify(set.body));
      assert.equal(set.body.now_playing.title, `Burst ${i}`, 'the title itself changes at once');
    }
    const burstSeconds = (Date.now() - started) / 1000;
    const history = (await request(service, 'GET', `/services/${serviceId}/now-playing`)).body.history;
    assert.equal(history[0].title, 'Burst 40');

    const events = await waitFor(
      'the latest title as an event',
      async () => {
        const rows = await trackEvents();
        return rows.at(-1)?.title === 'Burst 40' && rows;
      },
      30_000,
    );
    assert.equal(events[0].title, 'Burst 1');
    assert.equal(events[0].previous, null);
    // One at once, then at most one per 5 s window of the burst, the last one after it.
    assert.ok(events.length <= Math.floor(burstSeconds / 5) + 2, `${events.length} events in ${burstSeconds} s`);
    assert.ok(events.length < 40);
    for (let i = 1; i < events.length; i++) assert.equal(events[i].previous, events[i - 1].title);
  });

  test('a service keeps its last 200 track.changed events', { timeout: 60_000 }, async () => {
    // 300 old ones, as a service that ran for hours would have.
    await db.query(
      `INSERT INTO events (id, type, api_key_id, service_id, order_id, data, created_at)
       SELECT 'evt_old' || n, 'track.changed', api_key_id, id, order_id,
              jsonb_build_object('title', 'Old ' || n), now() - interval '1 hour'
         FROM services, generate_series(1, 300) n WHERE id = $1`,
      [serviceId],
    );
    // The window of the last event has passed: this one is recorded at once, and the cap applies.
    await waitFor(
      'the window to pass',
      async () => {
        const [row] = (
          await db.query(
            `SELECT count(*)::int AS recent FROM events WHERE service_id = $1 AND type = 'track.changed'
             AND created_at > now() - interval '6 seconds'`,
            [serviceId],
          )
        ).rows;
        return row.recent === 0;
      },
      20_000,
    );
    assert.equal((await setTitle('After the cap')).status, 200);
    const events = await waitFor('the new event', async () => {
      const rows = await trackEvents();
      return rows.at(-1)?.title === 'After the cap' && rows;
    });
    assert.equal(events.length, 200);
    const others = await db.query(
      `SELECT count(*)::int AS n FROM events WHERE service_id = $1 AND type <> 'track.changed'`,
      [serviceId],
    );
    assert.ok(others.rows[0].n > 0, 'other events are kept');
  });
});
