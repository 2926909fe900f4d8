import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { installed, openFilesHardLimit } from '../src/provisioning/index.js';
import { systemUserIds } from '../src/provisioning/system-user.js';
import { root } from './support/service.js';

// What serve asks the machine at every start, each answer checked against the shell's own.
const shell = (command: string) => spawnSync('sh', ['-c', command], { encoding: 'utf8' });

test('a program is installed when the shell finds it on PATH, not otherwise', () => {
  for (const program of ['sh', 'ffmpeg', 'icecast2', 'haproxy', 'nginx', 'no-such-program-here']) {
    assert.equal(installed(program), shell(`command -v ${program}`).status === 0, program);
  }
});

test("the open-files hard limit is the shell's `ulimit -H -n`, also under a lower one", () => {
  assert.equal(openFilesHardLimit(), Number(shell('ulimit -H -n').stdout.trim()));
  const module = pathToFileURL(join(root, 'src/provisioning/host-system.ts')).href;
  const lowered = spawnSync(
    'prlimit',
    [
      '--nofile=512:777',
      '--',
      process.execPath,
      '--import',
      'tsx',
      '-e',
      `import(${JSON.stringify(module)}).then((m) => process.stdout.write(String(m.openFilesHardLimit())))`,
    ],
    { encoding: 'utf8' },
  );
  assert.equal(lowered.stdout, '777', lowered.stderr);
});

test("a system user's ids are those `id` gives (root: only when we are root)", {
  skip: process.getuid?.() !== 0 && 'not root',
}, () => {
  for (const user of ['root', 'www-data', 'haproxy', 'icecast2']) {
    const uid = shell(`id -u ${user}`);
    const gid = shell(`id -g ${user}`);
    const expected = uid.status === 0 ? { uid: Number(uid.stdout), gid: Number(gid.stdout) } : undefined;
    assert.deepEqual(systemUserIds(user), expected, user);
  }
  assert.equal(systemUserIds('no-such-user-here'), undefined);
});
