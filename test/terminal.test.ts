import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, test } from 'node:test';
import { buy } from './support/purchase.js';
import { cli, copyCatalog, request, root, scratchDir, serveEntry, startService } from './support/service.js';
import { connectListener, hasMpegFrame, waitFor } from './support/streaming.js';
import { plain, spawnServe, type ServeProcess } from './support/terminal.js';
import { copyTemplateCluster } from './support/template-data-dir.js';
import { TestWallet } from './support/wallet.js';
import { requireStreamingTools } from './support/system-tools.js';
import { sine } from './support/tones.js';
import { devFile } from './support/dev-file.js';

// Operators at a terminal: readable logs on a TTY and JSON otherwise, a summary once ready, Ctrl-C (SIGINT to the
// whole process group) stopping everything within seconds with one line saying so, and a CLI that explains itself.
const running: ServeProcess[] = [];
after(() => {
  for (const s of running) s.kill();
});

requireStreamingTools();

/**
 * A DATA_DIR with the database serve's first start makes (a copy of the migrated template), for the tests that are not
 * about a first start: the others start on an empty one, as a newcomer does.
 */
async function startedDataDir(): Promise<string> {
  const dataDir = await scratchDir('audio-terminal-');
  await copyTemplateCluster(dataDir, 'migrated');
  return dataDir;
}

// The serves one after the other (their stops are timed); the command line's short processes beside them. The first
// serve runs bin/agent-audio.mjs on an empty DATA_DIR, as `npm start` does for a newcomer; the others run the tests'
// prebuilt entry, the same code without the two seconds of CPU tsx takes to load it.
describe('terminal', { concurrency: true }, () => {
  describe('serve', { concurrency: 1 }, () => {
    describe('serve, not on a terminal (JSON)', jsonLogs);
    describe('Ctrl-C while an AutoDJ plays', ctrlCWithAutoDj);
    describe('serve on a terminal', onATerminal);
  });
  describe('command line', { concurrency: 1 }, commandLine);
});

function jsonLogs(): void {
  test('every log line is JSON, PostgreSQL output stays at debug, one ready line; SIGINT to the process group stops it quickly and cleanly, and it starts again', async () => {
    const dataDir = await scratchDir('audio-terminal-');
    const serve = spawnServe({ DATA_DIR: dataDir });
    running.push(serve);
    await serve.waitFor(/metrics on \S+/);
    // The ready line follows the stdout lines.
    await waitFor('the ready line', () => /"msg":"ready"/.test(serve.stderr()), 30_000);

    const lines = serve.stderr().split('\n').filter(Boolean);
    const entries = lines.map((line) => {
      try {
        return JSON.parse(line);
      } catch {
        assert.fail(`not JSON: ${line}`);
      }
    });
    assert.deepEqual(
      entries.filter((e) => e.component === 'postgres'),
      [],
      'PostgreSQL output is at debug level',
    );
    const ready = entries.filter((e) => e.msg === 'ready');
    assert.equal(ready.length, 1, serve.stderr());
    const dev = await devFile(dataDir);
    assert.equal(ready[0].base_url, dev.base_url);
    assert.equal(ready[0].dev_file, join(dataDir, 'dev.json'));
    assert.ok(!JSON.stringify(ready[0]).includes(dev.api_key), 'the API key stays out of the logs');
    assert.equal(ready[0].chain_rpc_url, dev.chain.rpc_url);
    assert.match(ready[0].icecast_url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.match(ready[0].metrics_url, /\/metrics$/);
    assert.equal(ready[0].next, 'npm run demo');

    // Progress of a slow command goes to stderr, only when asked (stderr is not a terminal here); stdout is unchanged.
    const service = { baseUrl: dev.base_url, apiKey: dev.api_key };
    const quote = await request(service, 'POST', '/quotes', {
      body: { product_id: 'instant-stream', parameters: { duration_hours: 1, max_listeners: 1, bitrate_kbps: 64 } },
    });
    assert.equal(quote.status, 200, JSON.stringify(quote.body));
    const replayed = await cli(['audit', 'replay', '--all', '--progress'], { DATA_DIR: dataDir });
    assert.equal(replayed.code, 0, replayed.stderr);
    assert.match(replayed.stderr, /^replayed 1\/1$/m);
    assert.doesNotMatch(replayed.stdout, /replayed \d+\//);
    const quiet = await cli(['audit', 'replay', '--all'], { DATA_DIR: dataDir });
    assert.equal(quiet.stdout, replayed.stdout);
    assert.doesNotMatch(quiet.stderr, /replayed/);

    const signalled = performance.now();
    process.kill(-serve.child.pid!, 'SIGINT');
    const code = await Promise.race([serve.exited, sleep(30_000, 'still running', { ref: false })]);
    assert.equal(code, 0, serve.stderr());
    const seconds = (serve.exitedAt() - signalled) / 1000;
    console.log(`stopped ${seconds.toFixed(2)} s after SIGINT to the process group`);
    assert.ok(seconds < 5, `stopped after ${seconds} s`);
    assert.match(serve.stdout(), /^stopped \(SIGINT\) in \d+\.\d s$/m);
    const after = serve
      .stderr()
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line));
    assert.deepEqual(
      after.filter((e) => e.level === 'warn' || e.level === 'error'),
      [],
      'no warning or error on a normal stop',
    );
    assert.match(
      readFileSync(join(dataDir, 'icecast', 'error.log'), 'utf8'),
      /Shutting down/,
      'Icecast stopped by itself, not killed',
    );

    // The data is safe: the same DATA_DIR starts again, with the same key and the quote's record.
    const again = await startService({}, { dataDir });
    try {
      assert.equal(again.apiKey, dev.api_key);
      assert.equal((await request(again, 'GET', '/health', { auth: false })).status, 200);
      const listed = await again.cli(['audit', 'list', '--kind', 'quote_price']);
      assert.equal(JSON.parse(listed.stdout).length, 1);
    } finally {
      await again.stop();
    }
  });
}

function ctrlCWithAutoDj(): void {
  test('its ffmpeg processes stop with serve, with no warning', async () => {
    const dataDir = await startedDataDir();
    const serve = spawnServe({ DATA_DIR: dataDir, LIFECYCLE_INTERVAL_MS: '250' }, { entry: await serveEntry() });
    running.push(serve);
    await serve.waitFor(/metrics on \S+/);
    const dev = await devFile(dataDir);
    const service = { baseUrl: dev.base_url, apiKey: dev.api_key };
    const bought = await buy(service, new TestWallet(dev.buyer.private_key, dev.chain.rpc_url), {
      product_id: 'temporary-autodj',
      email: 'dj@example.com',
      station_name: 'Ctrl-C FM',
      parameters: { duration_hours: 2, bitrate_kbps: 64, storage_mb: 5, listeners: 3 },
    });
    assert.equal(bought.status, 200, JSON.stringify(bought.body));
    const id = bought.body.service.service_id;
    const tone = await sine({ seconds: 20 }, ['-f', 'wav']);
    assert.equal(
      (
        await request(service, 'PUT', `/services/${id}/files/tone.wav`, {
          rawBody: tone,
          headers: { 'content-type': 'application/octet-stream' },
        })
      ).status,
      201,
    );
    assert.equal(
      (await request(service, 'PUT', `/services/${id}/playlist`, { body: { playlist: ['tone.wav'] } })).status,
      200,
    );
    const listener = await waitFor(
      'the AutoDJ on air',
      async () => {
        const l = await connectListener(bought.body.service.stream_url).catch(() => undefined);
        if (l?.status === 200) return l;
        l?.close();
        return undefined;
      },
      60_000,
    );
    await waitFor('MPEG frames', () => hasMpegFrame(listener.received()), 30_000);
    listener.close();

    const before = serve.stderr().length;
    process.kill(-serve.child.pid!, 'SIGINT');
    assert.equal(await serve.exited, 0, serve.stderr());
    assert.match(serve.stdout(), /^stopped \(SIGINT\) in \d+\.\d s$/m);
    const entries = serve
      .stderr()
      .slice(before)
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line));
    assert.deepEqual(
      entries.filter((e) => e.level === 'warn' || e.level === 'error' || /exited|restart/.test(e.msg)),
      [],
    );
  });
}

function onATerminal(): void {
  test('readable lines and a summary; Ctrl-C stops it with one line', async () => {
    const dataDir = await scratchDir('audio-terminal-');
    const serve = spawnServe({ DATA_DIR: dataDir }, { terminal: true, entry: await serveEntry() });
    running.push(serve);
    await serve.waitFor(/ready in \d+\.\d s/);
    const shown = plain(serve.stdout()).split('\n');
    assert.deepEqual(
      shown.filter((l) => l.startsWith('{')),
      [],
      'no JSON lines on a terminal',
    );
    assert.ok(
      shown.some((l) => /^\[\d\d:\d\d:\d\d\] INFO: icecast started {2}component=icecast/.test(l)),
      shown.join('\n'),
    );
    assert.ok(!shown.some((l) => /initdb|database system is ready/.test(l)), 'PostgreSQL output is at debug level');
    const dev = await devFile(dataDir);
    assert.ok(shown.includes(`serving on ${dev.base_url}`));
    assert.ok(shown.some((l) => l.includes('dev.json') && l.includes(dataDir)));
    assert.ok(shown.some((l) => /^ {2}API key +/.test(l) && l.endsWith(dev.api_key)));
    assert.ok(shown.some((l) => /^ {2}chain RPC +/.test(l) && l.endsWith(dev.chain.rpc_url)));
    assert.ok(shown.some((l) => /^ {2}Icecast +http:\/\/127\.0\.0\.1:\d+ \(through HAProxy\)$/.test(l)));
    assert.ok(shown.some((l) => /^ready in .*npm run demo/.test(l)));

    const pressed = performance.now();
    serve.child.stdin!.write('\x03');
    const code = await Promise.race([serve.exited, sleep(30_000, 'still running', { ref: false })]);
    assert.equal(code, 0, plain(serve.stdout()));
    const seconds = (serve.exitedAt() - pressed) / 1000;
    console.log(`stopped ${seconds.toFixed(2)} s after Ctrl-C on a terminal`);
    assert.ok(seconds < 5, `stopped after ${seconds} s`);
    const end = plain(serve.stdout()).split('\n');
    assert.ok(
      end.some((l) => /^stopped \(SIGINT\) in \d+\.\d s$/.test(l)),
      end.slice(-10).join('\n'),
    );
    // Icecast 2.4.4 itself sometimes dies at start with a NULL dereference in libc (the kernel logs "icecast2: segfault
    // at 0 … in libc.so.6"; once or twice in the suite's 140 starts, more on a loaded machine); serve reports it and
    // starts it again.
    const icecastCrash = /WARN .*icecast exited .*signal=SIGSEGV$/;
    const warned = end.filter((l) => /WARN|ERROR/.test(l) && !icecastCrash.test(l));
    assert.deepEqual(warned, [], `no warning or error from start to stop; the whole output:\n${end.join('\n')}`);
  });

  test('LOG_FORMAT=json keeps JSON on a terminal', async () => {
    const dataDir = await startedDataDir();
    const serve = spawnServe({ DATA_DIR: dataDir, LOG_FORMAT: 'json' }, { terminal: true, entry: await serveEntry() });
    running.push(serve);
    await serve.waitFor(/metrics on \S+/);
    await serve.waitFor(/"msg":"ready"/, 30_000);
    const shown = plain(serve.stdout()).split('\n').filter(Boolean);
    assert.deepEqual(
      shown.filter((l) => !l.startsWith('{') && !/^(serving|metrics) on /.test(l)),
      [],
    );
    assert.ok(shown.some((l) => l.startsWith('{') && JSON.parse(l).msg === 'ready'));
    serve.child.stdin!.write('\x03');
    assert.equal(await serve.exited, 0);
  });
}

function commandLine(): void {
  const commands = [
    'serve',
    'catalog check',
    'catalog diff',
    'catalog preview',
    'keys create',
    'keys list',
    'keys revoke',
    'audit list',
    'audit show',
    'audit replay',
    'audit verify',
    'audit head',
    'audit export',
    'audit verify-bundle',
  ];

  test('--help, -h and help for every command: its usage on stdout, exit 0', async () => {
    for (const [i, command] of commands.entries()) {
      const words = command.split(' ');
      const asked = i % 3 === 0 ? ['help', ...words] : [...words, i % 3 === 1 ? '--help' : '-h'];
      const result = await cli(asked);
      assert.equal(result.code, 0, `${asked.join(' ')}: ${result.stderr}`);
      assert.match(result.stdout, new RegExp(`^usage: agent-audio ${command}`), asked.join(' '));
      assert.match(result.stdout, /\nexit 0/, asked.join(' '));
    }
    for (const group of ['keys', 'audit', 'catalog']) {
      const result = await cli([group, '--help']);
      assert.equal(result.code, 0);
      for (const command of commands.filter((c) => c.startsWith(`${group} `)))
        assert.ok(result.stdout.includes(`  ${command}`), `${group} --help lists ${command}`);
    }
    const overview = await cli(['help']);
    assert.equal(overview.code, 0);
    for (const command of commands) assert.ok(overview.stdout.includes(`  ${command}`), `help lists ${command}`);
  });

  test('usage errors: what is wrong first, then the usage, exit 2', async () => {
    for (const [args, first] of [
      [['frobnicate', '--help'], 'unknown command frobnicate'],
      [['keys', 'frob'], 'unknown command keys frob'],
      [['keys', 'frob', '--help'], 'unknown command keys frob'],
      [['constructor'], 'unknown command constructor'],
      [['help', 'frob'], 'unknown command frob'],
      [['keys'], 'keys needs a subcommand'],
      [[], 'agent-audio needs a command'],
      [['audit', 'replay'], 'audit replay needs ID or --all'],
      [['audit', 'replay', '--all', '--dry-run'], 'unknown option --dry-run for audit replay'],
      [['keys', 'create', '--nmae', 'x'], 'unknown option --nmae for keys create'],
      [['catalog', 'check', '--jsno'], 'unknown option --jsno for catalog check'],
    ] as const) {
      const result = await cli([...args]);
      assert.equal(result.code, 2, args.join(' '));
      assert.ok(result.stderr.startsWith(`${first}\n\nusage: agent-audio `), `${args.join(' ')}: ${result.stderr}`);
      assert.equal(result.stdout, '');
    }
  });

  test('every option takes its value as --flag=value too; a switch given a value is a usage error', async () => {
    const role = await cli(['serve', '--role=nope']);
    assert.equal(role.code, 2);
    assert.ok(role.stderr.startsWith('--role must be one of api, host, all, got nope\n'), role.stderr);
    const configuration = ['duration_hours=2', 'max_listeners=10', 'bitrate_kbps=128', 'transfer_gb=1'];
    const apart = await cli(['catalog', 'preview', 'instant-stream', ...configuration.flatMap((p) => ['--param', p])]);
    const joined = await cli(['catalog', 'preview', 'instant-stream', ...configuration.map((p) => `--param=${p}`)]);
    assert.equal(apart.code, 0, apart.stderr);
    assert.equal(joined.code, 0, joined.stderr);
    assert.equal(joined.stdout, apart.stdout);
    assert.match(joined.stdout, /total 0\.305 USDC/);
    for (const [args, first] of [
      [['catalog', 'check', '--json=yes'], '--json takes no value, got --json=yes'],
      [['keys', 'create', '--nmae=x'], 'unknown option --nmae for keys create'],
    ] as const) {
      const result = await cli([...args]);
      assert.equal(result.code, 2, args.join(' '));
      assert.ok(result.stderr.startsWith(`${first}\n\nusage: agent-audio `), `${args.join(' ')}: ${result.stderr}`);
    }
  });

  test('catalog diff: progress on stderr with --progress, never in the --json output', async () => {
    const copy = await copyCatalog();
    const env = { CATALOG_DIR: copy.catalogDir, RULES_DIR: copy.rulesDir };
    const shown = await cli(['catalog', 'diff', '--against', root, '--json', '--progress'], env);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stderr, /^pricing instant-stream: (\d+)\/\1 configurations before and after$/m);
    const quiet = await cli(['catalog', 'diff', '--against', root, '--json'], env);
    assert.doesNotMatch(quiet.stderr, /pricing/);
    assert.deepEqual(JSON.parse(shown.stdout), JSON.parse(quiet.stdout));
  });
}
