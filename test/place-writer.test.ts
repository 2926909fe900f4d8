import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import type { Logger } from '../src/log/index.js';
import { PlaceWriter } from '../src/services/place-writer.js';
import type { Database } from '../src/store/index.js';

const quiet: Logger = { info() {}, warn() {}, error() {} };

// The writer's own scheduling (its SQL runs in test/admission.test.ts): a database that fails the first write, as a
// host's bounded connections do after a partition, then answers.
test('a write that failed, then went through by a flush, leaves the writer writing what comes next', async () => {
  let failNext = true;
  let written = 0;
  const db = {
    async transaction() {
      if (failNext) {
        failNext = false;
        throw new Error('Query read timeout');
      }
      written++;
    },
  } as unknown as Database;
  const writer = new PlaceWriter(db, quiet);
  writer.push({ kind: 'remove', serviceId: 'svc_1', clientIds: ['1'] });
  await writer.flush(); // the first write fails: a retry is due in 500 ms
  assert.equal(written, 0);
  await writer.flush(); // a flush (before a database admission) writes it meanwhile
  assert.equal(written, 1);
  await sleep(700); // the retry comes and finds nothing to write
  writer.push({ kind: 'remove', serviceId: 'svc_1', clientIds: ['2'] });
  await sleep(100);
  assert.equal(written, 2, 'the next change is written behind the answers, without a flush');
  await writer.flush();
  await writer.stop();
});
