import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, cp, mkdir, open, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { copyCatalog, request, startService, type Service } from './support/service.js';

/** How long an edit may take to be served: the promise is 2 s; the slack is for a machine shared with other work. */
const boundMs = Number(process.env.RELOAD_BOUND_MS ?? 2000 + 1500);
const edits = Number(process.env.RELOAD_EDITS ?? 200);

const git = promisify(execFile);
let service: Service;
let catalog: Awaited<ReturnType<typeof copyCatalog>>;
let template: string;
const productFile = () => join(catalog.catalogDir, 'products/temporary-autodj.yaml');
const withPrice = (price: number) => template.replace('__PRICE__', String(price));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

before(async () => {
  catalog = await copyCatalog();
  const original = await readFile(productFile(), 'utf8');
  template = original.replace('amount_atomic: "490000"', 'amount_atomic: "__PRICE__"');
  assert.notEqual(template, original);
  await git('git', ['init', '-q'], { cwd: catalog.dir });
  // Each of the hundreds of edits reloads the catalog, pricing every configuration of the product edited.
  service = await startService({ CATALOG_DIR: catalog.catalogDir, RULES_DIR: catalog.rulesDir }, { hot: true });
});
after(async () => {
  await service?.stop();
  await catalog?.remove();
});

// The operator's view (the metrics listener): the hash on disk and the last reload error are not public.
const health = async () =>
  ((await (await fetch(service.metricsUrl.replace(/\/metrics$/, '/health/details'))).json()) as any).catalog;
const servedPrice = async () =>
  (await request(service, 'GET', '/products/temporary-autodj', { auth: false })).body.product.pricing.packages[0]
    .amount_atomic as string;

/** Polls until the condition holds; returns how long it took, or fails after boundMs. */
async function converge(what: string, condition: () => Promise<boolean>): Promise<number> {
  const started = performance.now();
  while (!(await condition())) {
    if (performance.now() - started > boundMs)
      assert.fail(`${what}: not served within ${boundMs} ms (health: ${JSON.stringify(await health())})`);
    await sleep(20);
  }
  return performance.now() - started;
}

/** Ways editors and tools put new content into a file; each leaves `text` on disk at `path`. */
const writers: Record<string, (path: string, text: string) => Promise<void>> = {
  async inPlace(path, text) {
    const file = await open(path, 'r+');
    await file.write(text, 0);
    await file.truncate(Buffer.byteLength(text));
    await file.close();
  },
  async truncateThenWrite(path, text) {
    const file = await open(path, 'w');
    await sleep(Math.random() * 30);
    await file.write(text);
    await file.close();
  },
  async copyOver(path, text) {
    const source = join(catalog.dir, 'copy-source.yaml');
    await writeFile(source, text);
    await copyFile(source, path);
  },
  async renameOver(path, text) {
    const temporary = join(catalog.dir, 'atomic-save.tmp');
    await writeFile(temporary, text);
    await rename(temporary, path);
  },
};

/** Replaces a whole directory (catalog/products or catalog/ itself) by an edited copy, as a deployment tool would. */
async function replaceDirectory(dir: string, text: string): Promise<void> {
  const staging = join(catalog.dir, 'staging');
  const old = join(catalog.dir, 'old');
  await cp(dir, staging, { recursive: true });
  const relativeFile = productFile().slice(dir.length + 1);
  await writeFile(join(staging, relativeFile), text);
  await rename(dir, old);
  await rename(staging, dir);
  await rm(old, { recursive: true, force: true });
}

describe('catalog hot reload', () => {
  test(`${edits} randomized edits of every kind are each served within the bound`, async () => {
    // Commits to `git checkout` from, each with its own price.
    const commits: { sha: string; price: number }[] = [];
    for (let i = 0; i < 6; i++) {
      const price = 480000 + i;
      await writeFile(productFile(), withPrice(price));
      await git('git', ['add', '-A'], { cwd: catalog.dir });
      await git('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', `price ${price}`], {
        cwd: catalog.dir,
      });
      commits.push({ sha: (await git('git', ['rev-parse', 'HEAD'], { cwd: catalog.dir })).stdout.trim(), price });
    }

    let current = 480005;
    // The commits above are edits too: the loop starts once the last one is served (an 'invalid' edit first would
    // otherwise read its "before" while that reload is still on its way).
    await converge('the last commit served', async () => (await servedPrice()) === String(current));
    const fresh = () => {
      let price;
      do price = 481000 + Math.floor(Math.random() * 18000);
      while (price === current);
      return price;
    };
    const kinds = [
      ...Object.keys(writers),
      'gitCheckout',
      'burst',
      'replaceProducts',
      'replaceCatalog',
      'invalid',
    ] as const;
    const counts: Record<string, number> = {};
    const times: number[] = [];
    let written = 0;
    const started = performance.now();
    while (written < edits) {
      const kind = kinds[Math.floor(Math.random() * kinds.length)];
      counts[kind] = (counts[kind] ?? 0) + 1;
      let expected: number;
      if (kind === 'gitCheckout') {
        const commit = commits[Math.floor(Math.random() * commits.length)];
        await git('git', ['checkout', '-q', commit.sha, '--', 'catalog/products/temporary-autodj.yaml'], {
          cwd: catalog.dir,
        });
        expected = commit.price;
        written++;
      } else if (kind === 'burst') {
        // Several edits within the same second, of random kinds; the last one must win.
        const names = Object.keys(writers);
        for (let i = 0; i < 4; i++) {
          expected = fresh();
          await writers[names[Math.floor(Math.random() * names.length)]](productFile(), withPrice(expected));
          current = expected;
          written++;
        }
        expected = current;
      } else if (kind === 'replaceProducts' || kind === 'replaceCatalog') {
        expected = fresh();
        await replaceDirectory(
          kind === 'replaceCatalog' ? catalog.catalogDir : join(catalog.catalogDir, 'products'),
          withPrice(expected),
        );
        written++;
      } else if (kind === 'invalid') {
        // A rejected edit keeps the last good price and says where the error is; the next edit fixes it.
        const before = await health();
        await writers.renameOver(
          productFile(),
          withPrice(fresh()).replace('bitrate_kbps: { type: integer', 'bitrate_kbps: { type: integr'),
        );
        written++;
        await converge('an invalid edit reported', async () => (await health()).reload_errors > 0);
        const now = await health();
        assert.equal(now.content_hash, before.content_hash);
        assert.notEqual(now.disk_content_hash, now.content_hash);
        assert.match(now.last_reload_error.location, /catalog\/products\/temporary-autodj\.yaml:\d+:\d+$/);
        assert.equal(await servedPrice(), String(current));
        expected = fresh();
        await writers.truncateThenWrite(productFile(), withPrice(expected));
        written++;
      } else {
        expected = fresh();
        await writers[kind](productFile(), withPrice(expected));
        written++;
      }
      current = expected!;
      times.push(await converge(`${kind} to ${current}`, async () => (await servedPrice()) === String(current)));
    }
    const final = await converge('the served hash equal to the disk hash', async () => {
      const h = await health();
      return h.content_hash === h.disk_content_hash && h.reload_errors === 0;
    });
    assert.ok(final >= 0);
    times.sort((a, b) => a - b);
    console.log(
      `reload: ${written} edits in ${times.length} steps (${JSON.stringify(counts)}), ${Math.round(performance.now() - started)} ms; ` +
        `convergence median ${Math.round(times[times.length >> 1])} ms, max ${Math.round(times[times.length - 1])} ms`,
    );
  });
});
