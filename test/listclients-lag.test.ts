import assert from 'node:assert/strict';
import { test } from 'node:test';
import { listclientsLagMs, PROXY_QUEUE_SECONDS, PROXY_USER } from '../src/provisioning/index.js';

// A place is freed when Icecast's listclients has not shown its listener for this long after the admission. HAProxy
// admits before its queue towards Icecast, so a listener admitted in a burst may reach Icecast up to `timeout queue`
// later: freeing its place before then lets one listener more than the cap in once it arrives.
test("a proxy-admitted listener keeps its place for as long as HAProxy's queue may hold it", () => {
  assert.ok(listclientsLagMs(`${PROXY_USER}6f1c2a4e-1b2c-4d3e-8f90-0123456789ab`) > PROXY_QUEUE_SECONDS * 1000);
});

test('a listener Icecast asked about itself is expected in listclients within seconds', () => {
  assert.equal(listclientsLagMs('42'), 10_000);
});
