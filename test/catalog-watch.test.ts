import assert from 'node:assert/strict';
import { cp, mkdir, open, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { DirectoryWatch } from '../src/catalog/directory-watch.js';
import { LiveSnapshot } from '../src/catalog/live-snapshot.js';
import { copyCatalog } from './support/service.js';

/**
 * Edits must reach the service by file-system events, not only by the periodic check: these tests turn the check off
 * (an hour) and wait for the event. A wait that runs out is a lost event (the bound is liveness, not speed).
 */
const eventWaitMs = 10_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `happened` holds; fails naming `what` after eventWaitMs. */
async function eventually(what: string, happened: () => boolean): Promise<void> {
  const deadline = performance.now() + eventWaitMs;
  while (!happened()) {
    if (performance.now() > deadline) assert.fail(`${what}: no file-system event`);
    await sleep(10);
  }
}

function counter() {
  let seen = 0;
  return {
    onChange: () => void seen++,
    /** Fails unless an event comes after `edit` (events of earlier edits are let in before it starts). */
    async after(what: string, edit: () => Promise<void>): Promise<void> {
      await sleep(50);
      const before = seen;
      await edit();
      await eventually(what, () => seen > before);
    },
  };
}

async function writeInPlace(path: string, text: string): Promise<void> {
  const file = await open(path, 'r+');
  await file.write(text, 0);
  await file.truncate(Buffer.byteLength(text));
  await file.close();
}

describe('DirectoryWatch', () => {
  const cleanups: (() => Promise<void>)[] = [];
  after(async () => {
    for (const cleanup of cleanups) await cleanup();
  });

  test('every kind of edit makes an event, also after the file or its directory was replaced', async () => {
    const catalog = await copyCatalog();
    cleanups.push(catalog.remove);
    const file = () => join(catalog.catalogDir, 'products/temporary-autodj.yaml');
    const events = counter();
    const watch = new DirectoryWatch([catalog.catalogDir, catalog.rulesDir], events.onChange);
    cleanups.push(async () => watch.close());
    await watch.rearm();

    await events.after('an in-place write', () => writeInPlace(file(), 'a: 1\n'));
    const temporary = join(catalog.dir, 'save.tmp');
    await events.after('a rename over the file', async () => {
      await writeFile(temporary, 'a: 2\n');
      await rename(temporary, file());
    });
    // Node 20's recursive watch on Linux stays silent from here on: it watched the replaced file's inode.
    await events.after('an in-place write after the rename', () => writeInPlace(file(), 'a: 3\n'));
    await events.after('a second in-place write', () => writeInPlace(file(), 'a: 4\n'));
    await events.after('a rules edit', () => writeFile(join(catalog.rulesDir, 'new.json'), '{}'));

    await events.after('a new directory', () => mkdir(join(catalog.catalogDir, 'products/more')));
    await watch.rearm();
    await events.after('a file in the new directory', () =>
      writeFile(join(catalog.catalogDir, 'products/more/x.yaml'), 'b: 1\n'),
    );

    for (const dir of [join(catalog.catalogDir, 'products'), catalog.catalogDir]) {
      const staging = join(catalog.dir, 'staging');
      await cp(dir, staging, { recursive: true });
      await events.after(`${dir} replaced by a rename`, async () => {
        await rename(dir, join(catalog.dir, 'old'));
        await rename(staging, dir);
      });
      await rm(join(catalog.dir, 'old'), { recursive: true });
      await watch.rearm();
      await events.after(`an in-place write in the new ${dir}`, () => writeInPlace(file(), 'a: 5\n'));
    }
  });

  test('a root that is a symbolic link makes an event when it is switched, and watches its new target', async () => {
    const catalog = await copyCatalog();
    cleanups.push(catalog.remove);
    const releases = [join(catalog.dir, 'release-1'), join(catalog.dir, 'release-2')];
    for (const release of releases) await cp(catalog.catalogDir, release, { recursive: true });
    const link = join(catalog.dir, 'current');
    await symlink(releases[0], link);
    const events = counter();
    const watch = new DirectoryWatch([link], events.onChange);
    cleanups.push(async () => watch.close());
    await watch.rearm();

    await events.after('a switched symbolic link', async () => {
      await symlink(releases[1], `${link}.new`);
      await rename(`${link}.new`, link);
    });
    await watch.rearm();
    await events.after('an edit in the new target', () =>
      writeInPlace(join(releases[1], 'products/temporary-autodj.yaml'), 'a: 1\n'),
    );
  });
});

describe('LiveSnapshot', () => {
  test('serves an edit by its file-system event, for each way an editor or a deployment saves it', async () => {
    const catalog = await copyCatalog();
    const file = () => join(catalog.catalogDir, 'products/temporary-autodj.yaml');
    const template = (await readFile(file(), 'utf8')).replace('amount_atomic: "490000"', 'amount_atomic: "__PRICE__"');
    const live = await LiveSnapshot.open(catalog.catalogDir, catalog.rulesDir);
    await live.watch({ checkIntervalMs: 3_600_000 });
    const served = () => live.current.files['catalog/products/temporary-autodj.yaml'];
    try {
      const saves: Record<string, (text: string) => Promise<void>> = {
        inPlace: (text) => writeInPlace(file(), text),
        renameOver: async (text) => {
          await writeFile(join(catalog.dir, 'save.tmp'), text);
          await rename(join(catalog.dir, 'save.tmp'), file());
        },
        replaceCatalog: async (text) => {
          const staging = join(catalog.dir, 'staging');
          await cp(catalog.catalogDir, staging, { recursive: true });
          await writeFile(join(staging, 'products/temporary-autodj.yaml'), text);
          await rename(catalog.catalogDir, join(catalog.dir, 'old'));
          await rename(staging, catalog.catalogDir);
          await rm(join(catalog.dir, 'old'), { recursive: true });
        },
      };
      // In-place writes after each replacement: what the recursive watch lost.
      const order = ['inPlace', 'renameOver', 'inPlace', 'replaceCatalog', 'inPlace', 'renameOver', 'inPlace'];
      for (const [i, kind] of order.entries()) {
        const price = String(481000 + i);
        await saves[kind](template.replace('__PRICE__', price));
        await eventually(`${kind} to ${price} reloaded`, () => served().includes(`amount_atomic: "${price}"`));
        assert.equal(live.diskHash, live.current.hash);
      }
    } finally {
      live.close();
      await catalog.remove();
    }
  });
});
