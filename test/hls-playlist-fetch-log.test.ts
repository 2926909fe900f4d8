import assert from 'node:assert/strict';
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { PlaylistFetchLog } from '../src/hls/playlist-fetch-log.js';

// nginx's log of the playlists it answered, read in batches: complete lines only (a line nginx is still writing waits
// for the next read), lines that are not ours skipped, and a log started again from nothing read from its start.
let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hls-fetch-log-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const TOKEN = 'A'.repeat(22) + 'B'.repeat(16);
const line = (ms: string, status = 200, bytes = 490) =>
  `${ms} ${TOKEN} svc_fetchlog_test ${status} ${bytes} "6b0c1f8a-1ea"`;

test('complete lines are read once, a partial one when it is complete, others skipped', async () => {
  const path = join(dir, 'playlists.log');
  const log = new PlaylistFetchLog(path);
  assert.deepEqual(await log.read(), [], 'no log yet');
  await writeFile(
    path,
    `${line('1764420000.250')}\nnot a line of ours\n${line('1764420001.500', 304, 0).slice(0, 30)}`,
  );
  const first = await log.read();
  assert.deepEqual(first, [
    {
      at: 1764420000250,
      token: TOKEN,
      serviceId: 'svc_fetchlog_test',
      status: 200,
      bytes: 490,
      etag: '"6b0c1f8a-1ea"',
    },
  ]);
  await appendFile(path, `${line('1764420001.500', 304, 0).slice(30)}\n`);
  const second = await log.read();
  assert.equal(second.length, 1);
  assert.equal(second[0].status, 304);
  assert.equal(second[0].at, 1764420001500);
  assert.deepEqual(await log.read(), [], 'nothing twice');
  // Started again from nothing (shorter than what was read): read from its start.
  await writeFile(path, `${line('1764420002.000')}\n`);
  assert.equal((await log.read()).length, 1);
});
