import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { programsUsing } from './support/processes.js';
import { cli, copyCatalog, request, scratchDir, startService, type Service } from './support/service.js';
import { serveLock } from './support/serve-lock.js';

const started: Service[] = [];
after(async () => {
  await Promise.all(started.map((s) => s.stop('SIGKILL')));
});

async function start(env: Record<string, string> = {}, dataDir?: string) {
  const service = await startService(env, { dataDir });
  started.push(service);
  return service;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function postgresPid(dataDir: string): Promise<number> {
  return Number((await readFile(join(dataDir, 'pg/postmaster.pid'), 'utf8')).split('\n')[0]);
}

/**
 * The tests that stop and start serve on a DATA_DIR take it over from the one before (a service on a DATA_DIR that has
 * been restarted is as good as a fresh one for them), so the file starts as few services as it can; each test still
 * starts one of its own when the one before left none running.
 */
let shared: Service | undefined;

async function running(): Promise<Service> {
  if (!shared || shared.process.exitCode !== null || shared.process.signalCode !== null) shared = await start();
  return shared;
}

const instant = { product_id: 'instant-stream', parameters: { duration_hours: 1, max_listeners: 1, bitrate_kbps: 16 } };

describe('serve', () => {
  test('refuses to start in production with a test hook set, naming it', async (t) => {
    const dataDir = await scratchDir('audio-prod-hooks-');
    for (const [name, value] of [
      ['ORDER_CRASH_AT', 'after_claim'],
      ['ORDER_PAUSE_AT', 'after_claim:1000'],
      ['SSRF_TEST_PUBLIC_ADDRESSES', '127.0.0.1'],
      ['WEBHOOK_ALLOW_INSECURE_LOOPBACK', '1'],
    ]) {
      await t.test(name, async () => {
        const run = await cli(
          ['serve'],
          { AUDIO_API_ENV: 'production', DATA_DIR: dataDir, PORT: '0', [name]: value },
          30_000,
        );
        assert.equal(run.code, 1, run.stderr);
        assert.match(
          run.stderr,
          new RegExp(`^error: ${name} is a test hook and cannot be set with AUDIO_API_ENV=production`, 'm'),
        );
      });
    }
  });

  test('a start that fails in one of the steps started side by side undoes the others', async () => {
    // PostgreSQL, the chain and the catalog start together: the catalog fails while the others are still starting.
    const catalog = await copyCatalog();
    await writeFile(join(catalog.catalogDir, 'products/instant-stream.yaml'), 'id: instant-stream\nprice: [\n');
    const dataDir = await scratchDir('audio-failed-start-');
    const env = { CATALOG_DIR: catalog.catalogDir, RULES_DIR: catalog.rulesDir };
    const failed = await startService(env, { dataDir }).then(
      () => assert.fail('serve started on a catalog with a syntax error'),
      (e: Error) => e.message,
    );
    assert.match(failed, /serve exited with 1/);
    assert.match(failed, /instant-stream\.yaml/);
    assert.deepEqual(programsUsing(dataDir), [], 'PostgreSQL and anvil were stopped');
  });

  test('refuses a second serve on the same DATA_DIR, stops cleanly on SIGTERM and keeps the dev key', async () => {
    const first = await running();
    const pgPid = await postgresPid(first.dataDir);
    assert.ok(isAlive(pgPid));

    const second = await cli(['serve'], { DATA_DIR: first.dataDir, PORT: '0' }, 30_000);
    assert.notEqual(second.code, 0);
    assert.match(second.stderr, /another serve \(pid \d+\) is already using DATA_DIR/);
    assert.equal(
      (await request(first, 'POST', '/quotes', { body: instant })).status,
      200,
      'the first one is untouched',
    );

    assert.equal(await first.stop('SIGTERM'), 0);
    for (let i = 0; i < 50 && isAlive(pgPid); i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(isAlive(pgPid), false, 'PostgreSQL stopped with serve');

    const again = await start({}, first.dataDir);
    shared = again;
    assert.equal(again.apiKey, first.apiKey, 'the development key survives a restart');
    assert.equal((await request(again, 'POST', '/quotes', { body: instant })).status, 200);
  });

  test('recovers the embedded PostgreSQL left behind by a killed serve', async () => {
    const first = await running();
    const pgPid = await postgresPid(first.dataDir);
    assert.ok(isAlive(pgPid));
    await first.stop('SIGKILL');
    const next = await start({}, first.dataDir);
    shared = next;
    assert.equal(isAlive(pgPid), false, 'the orphan was stopped');
    assert.equal((await request(next, 'POST', '/quotes', { body: instant })).status, 200);
  });

  test('in production without payment configuration, orders answer 503 and availability says why', async () => {
    const prod = await start({ AUDIO_API_ENV: 'production' });
    const { api_key: apiKey } = JSON.parse((await prod.cli(['keys', 'create', '--name', 'prod'])).stdout);
    const agent = { baseUrl: prod.baseUrl, apiKey };
    const availability = await request(agent, 'GET', '/availability', { auth: false });
    assert.equal(availability.body.agent_checkout.configured, false);
    assert.match(availability.body.agent_checkout.reason, /X402_PAY_TO/);
    const order = await request(agent, 'POST', '/orders', {
      body: { product_id: 'instant-stream', email: 'a@example.com', station_name: 'x', parameters: instant.parameters },
      headers: { 'idempotency-key': 'k1' },
    });
    assert.equal(order.status, 503);
    assert.equal(order.body.error.code, 'machine_payment_not_configured');
    assert.equal(order.body.error.retryable, true);
    await prod.stop();
  });

  test('with DATABASE_URL a second instance shares the database and the idempotency scope', async () => {
    const first = await running();
    const lock = await serveLock(first);
    const second = await start({ DATABASE_URL: lock.database_url });
    assert.equal((await request(second, 'GET', '/health', { auth: false })).body.checks.database.ok, true);
    const pgPid = await postgresPid(first.dataDir);

    const key = `two-instances-${Date.now()}`;
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        request({ baseUrl: (i % 2 ? first : second).baseUrl, apiKey: first.apiKey }, 'POST', '/quotes', {
          body: instant,
          headers: { 'idempotency-key': key },
        }),
      ),
    );
    assert.deepEqual(
      answers.map((a) => a.status),
      Array(10).fill(200),
    );
    assert.equal(new Set(answers.map((a) => a.body.quote.id)).size, 1);
    assert.equal(answers.filter((a) => !a.body.idempotency.replayed).length, 1);

    await second.stop();
    assert.ok(isAlive(pgPid), 'an instance on DATABASE_URL does not own PostgreSQL');
    await first.stop();
  });
});
