import assert from 'node:assert/strict';
import { test } from 'node:test';
import { clientNetwork } from '../src/services/index.js';

// What the owner sees of a listener's address: its network, never the address itself.
test('a listener is kept as its /24 (IPv4) or /48 (IPv6) network', () => {
  assert.equal(clientNetwork('203.0.113.77'), '203.0.113.0/24');
  assert.equal(clientNetwork('::ffff:198.51.100.9'), '198.51.100.0/24', 'IPv4-mapped IPv6 is IPv4');
  assert.equal(clientNetwork('2001:db8:abcd:12:34:56:78:9a'), '2001:db8:abcd::/48');
  assert.equal(clientNetwork('2001:DB8:ABCD:0012::1'), '2001:db8:abcd::/48');
  assert.equal(clientNetwork('2001:db8::1'), '2001:db8:0::/48');
  assert.equal(clientNetwork('::1'), '0:0:0::/48');
  assert.equal(clientNetwork('not an address'), 'unknown');
});
