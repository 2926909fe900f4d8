import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { configFromEnv, settingNames, SettingError } from '../src/cli/config.js';
import { payments } from '../src/cli/payments.js';
import { jsonLogger } from '../src/log/index.js';
import { PaymentGateway } from '../src/payments/payment-gateway.js';
import { cli, root, scratchDir } from './support/service.js';

// One configuration: every setting is read, checked and documented in one place.

/** The variables docs/configuration.md's table names (first column, each `NAME` in it). */
async function documentedSettings(): Promise<Set<string>> {
  const table = await readFile(join(root, 'docs', 'configuration.md'), 'utf8');
  const names = table
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .flatMap((line) => [...line.split('|')[1].matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]));
  return new Set(names);
}

test('the configuration table (docs/configuration.md) lists exactly the settings the configuration reads', async () => {
  const documented = await documentedSettings();
  const read = settingNames();
  assert.deepEqual([...read].filter((n) => !documented.has(n)).sort(), [], 'read but not in the configuration table');
  assert.deepEqual([...documented].filter((n) => !read.has(n)).sort(), [], 'in the configuration table but never read');
});

test('nothing under src/ reads process.env but the configuration module', async () => {
  const files = (await readdir(join(root, 'src'), { recursive: true })).filter((f) => f.endsWith('.ts'));
  const readers = [];
  for (const file of files)
    if ((await readFile(join(root, 'src', file), 'utf8')).includes('process.env')) readers.push(file);
  assert.deepEqual(readers, ['cli/config.ts']);
});

const refused: Array<[Record<string, string>, RegExp]> = [
  [
    { RATE_LIMIT_PER_IP: 'lots' },
    /^RATE_LIMIT_PER_IP must be a whole number 0 or more \(0 turns the limit off\), got "lots"$/,
  ],
  [{ LIFECYCLE_INTERVAL_MS: '-5' }, /^LIFECYCLE_INTERVAL_MS must be a whole number 10 or more, got "-5"$/],
  [{ PORT: '70000' }, /^PORT must be a whole number from 0 to 65535 \(0: a free port\), got "70000"$/],
  [{ ORDER_LEASE_SECONDS: '1.5' }, /^ORDER_LEASE_SECONDS must be a whole number 1 or more, got "1.5"$/],
  [{ LOG_FORMAT: 'xml' }, /^LOG_FORMAT must be one of json, pretty, got "xml"$/],
  [{ AGENT_SIGNUP: 'maybe' }, /^AGENT_SIGNUP must be on or off, got "maybe"$/],
  [{ X402_FACILITATOR_URL: 'ftp://x' }, /^X402_FACILITATOR_URL must be an http\(s\) URL, got "ftp:\/\/x"$/],
  [{ SOURCE_BITRATE_TOLERANCE: '9' }, /^SOURCE_BITRATE_TOLERANCE must be a number from 1 to 4, got "9"$/],
  [{ STREAMING_HOST_ID: 'a b' }, /^STREAMING_HOST_ID must be 1 to 100 letters, digits or \. _ : -, got "a b"$/],
  [
    { WEBHOOK_LEASE_SECONDS: '5' },
    /^WEBHOOK_LEASE_SECONDS must be a whole number 6 or more \(longer than the 5 s delivery timeout\), got "5"$/,
  ],
  [{ ICECAST_PROXY: 'nginx' }, /^ICECAST_PROXY must be one of haproxy, front-door, got "nginx"$/],
  [
    { ICECAST_FRONT_DOOR: 'false' },
    /^ICECAST_FRONT_DOOR must be on with ICECAST_PROXY=haproxy \(off needs ICECAST_PROXY=front-door\), got "false"$/,
  ],
  [{ AUDIO_API_ENV: 'prod' }, /^AUDIO_API_ENV must be one of production, development, got "prod"$/],
  [{ RELAY_FIRST_RETRY_MS: '0' }, /^RELAY_FIRST_RETRY_MS must be a whole number from 10 to 300000, got "0"$/],
  [{ HOST_RECONCILE_INTERVAL_MS: '50' }, /^HOST_RECONCILE_INTERVAL_MS must be a whole number 100 or more, got "50"$/],
  [
    { X402_PAY_TO: 'not-an-address' },
    /^X402_PAY_TO must be the 0x address \(0x and 40 hex digits\) of the wallet that receives payments, got "not-an-address"$/,
  ],
  [
    { X402_PAY_TO: `0x${'0'.repeat(40)}` },
    /^X402_PAY_TO must be the address of the wallet that receives payments, not the zero address \(what is paid to it is lost\), got "0x0{40}"$/,
  ],
  [
    { X402_ASSET: 'usdc' },
    /^X402_ASSET must be a 0x address \(0x and 40 hex digits\) of the token contract, got "usdc"$/,
  ],
  [
    { X402_NETWORK: 'base-mainnet' },
    /^X402_NETWORK must be base, base-sepolia or a CAIP-2 network id such as eip155:8453, got "base-mainnet"$/,
  ],
];

for (const [env, message] of refused) {
  test(`a bad setting is refused with one sentence naming it: ${Object.keys(env)[0]}`, () => {
    assert.throws(
      () => configFromEnv(env),
      (e: Error) => e instanceof SettingError && message.test(e.message),
    );
  });
}

test('defaults, and values read as their types', () => {
  const config = configFromEnv({
    RATE_LIMIT_PER_IP: '0',
    ICECAST_MAX_SOURCES: '7',
    AGENT_SIGNUP: 'off',
    SOURCE_BITRATE_WINDOW_SECONDS: '12.5',
  });
  assert.equal(config.http.ratePerIp, 0);
  assert.equal(config.http.ratePerKey, 100);
  assert.equal(config.streaming.maxSources, 7);
  assert.equal(config.signup.enabled, false);
  assert.equal(config.streaming.sourceBudget.windowSeconds, 12.5);
  assert.deepEqual(config.streaming.recording, { gapSeconds: 60, cleanupIntervalSeconds: 60 });
  assert.equal(config.production, false);
  assert.equal(config.port, 8080);
  assert.equal(config.streaming.proxy, 'haproxy');
  const fallback = configFromEnv({ ICECAST_PROXY: 'front-door', ICECAST_FRONT_DOOR: 'off' }).streaming;
  assert.deepEqual([fallback.proxy, fallback.frontDoor], ['front-door', false]);
});

test('serve on a machine without haproxy stops at once and says to run setup or choose the front door', async (t) => {
  // /usr/bin has node and icecast2; Debian puts haproxy in /usr/sbin.
  const path = '/usr/bin:/bin';
  const found = spawnSync('sh', ['-c', 'command -v icecast2 && ! command -v haproxy'], { env: { PATH: path } });
  if (found.status !== 0) return t.skip(`this machine has no icecast2, or has haproxy, in ${path}`);
  const run = await cli(['serve'], { DATA_DIR: await scratchDir('audio-no-haproxy-'), PATH: path }, 60_000);
  assert.equal(run.code, 1, run.stderr);
  assert.equal(
    run.stderr,
    'error: haproxy is not installed, and ICECAST_PROXY=haproxy (the default) puts it in front of Icecast: run npm ' +
      "run setup (it installs Debian's haproxy), or set ICECAST_PROXY=front-door to carry listeners through serve " +
      'itself\n',
  );
});

test('serve stops at once on a bad setting, with the sentence and no stack trace', async () => {
  const run = await cli(
    ['serve'],
    { DATA_DIR: await scratchDir('audio-bad-setting-'), RATE_LIMIT_PER_IP: 'lots' },
    30_000,
  );
  assert.equal(run.code, 1);
  assert.equal(
    run.stderr,
    'error: RATE_LIMIT_PER_IP must be a whole number 0 or more (0 turns the limit off), got "lots"\n',
  );
});

test("serve names DATABASE_URL, not an agent's retry advice, when that PostgreSQL does not answer", async () => {
  const env = {
    AUDIO_API_ENV: 'production',
    DATA_DIR: await scratchDir('audio-no-db-'),
    DATABASE_URL: 'postgres://audio:secret@127.0.0.1:1/audio',
  };
  const run = await cli(['serve'], env, 30_000);
  assert.equal(run.code, 1);
  assert.match(
    run.stderr,
    /^error: the PostgreSQL of DATABASE_URL \(127\.0\.0\.1:1\/audio\) could not be used: no connection could be made\./,
  );
  assert.doesNotMatch(run.stderr, /Idempotency-Key|secret/);
});

test("a verify's timeout is the facilitator timeout unless set on its own", () => {
  const shared = configFromEnv({ X402_FACILITATOR_TIMEOUT_MS: '1500' }).payments;
  assert.deepEqual([shared.facilitatorTimeoutMs, shared.facilitatorVerifyTimeoutMs], [1500, 1500]);
  const own = configFromEnv({ X402_FACILITATOR_TIMEOUT_MS: '1500', X402_FACILITATOR_VERIFY_TIMEOUT_MS: '15000' });
  assert.deepEqual([own.payments.facilitatorTimeoutMs, own.payments.facilitatorVerifyTimeoutMs], [1500, 15000]);
  assert.throws(() => configFromEnv({ X402_FACILITATOR_VERIFY_TIMEOUT_MS: '5' }), SettingError);
});

test('named networks set the chain and its USDC; a CAIP-2 id of a known network gets its USDC too', () => {
  const base = configFromEnv({ X402_NETWORK: 'base' }).payments;
  assert.equal(base.network, 'eip155:8453');
  assert.equal(base.asset, '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913');
  for (const network of ['base-sepolia', 'eip155:84532']) {
    const sepolia = configFromEnv({ X402_NETWORK: network }).payments;
    assert.equal(sepolia.network, 'eip155:84532');
    assert.equal(sepolia.asset, '0x036CbD53842c5426634e7929541eC2318f3dCF7e');
  }
  assert.equal(configFromEnv({}).payments.asset, '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913');
  const other = '0x1111111111111111111111111111111111111111';
  assert.equal(configFromEnv({ X402_NETWORK: 'base-sepolia', X402_ASSET: other }).payments.asset, other);
  assert.equal(configFromEnv({ X402_NETWORK: 'eip155:1' }).payments.network, 'eip155:1');
});

test("the 402 names the network's USDC and its EIP-712 domain: Base's is USD Coin, Base Sepolia's is USDC", async () => {
  const offered: Record<string, unknown> = {};
  for (const name of ['base', 'base-sepolia']) {
    const { network, asset } = configFromEnv({ X402_NETWORK: name }).payments;
    const facilitator = {
      getSupported: async () => ({
        kinds: [{ x402Version: 2, scheme: 'exact', network }],
        extensions: [],
        signers: {},
      }),
      verify: async () => assert.fail('not asked'),
      settle: async () => assert.fail('not asked'),
    };
    const gateway = new PaymentGateway(facilitator as never, {
      network,
      asset: asset!,
      payTo: '0x976EA74026E726554dB657fA54763abd0C3a0aa9',
      maxTimeoutSeconds: 60,
    });
    const requirements = await gateway.requirements('270000');
    offered[name] = { network: requirements.network, asset: requirements.asset, extra: requirements.extra };
  }
  assert.deepEqual(offered, {
    base: {
      network: 'eip155:8453',
      asset: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
      extra: { name: 'USD Coin', version: '2' },
    },
    'base-sepolia': {
      network: 'eip155:84532',
      asset: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
      extra: { name: 'USDC', version: '2' },
    },
  });
});

test('a refund key file missing, a directory or without a key: one sentence naming X402_REFUND_KEY_FILE, no key echoed', async () => {
  const dir = await scratchDir('audio-refund-key-');
  const wrong = join(dir, 'wrong.key');
  const secretish = `0x${'ab'.repeat(31)}`; // one byte short of a key: it must not be printed
  await writeFile(wrong, `${secretish}\n`);
  const cases: Array<[Record<string, string>, RegExp]> = [
    [
      { X402_REFUND_KEY_FILE: join(dir, 'missing.key') },
      /^X402_REFUND_KEY_FILE names \/.*\/missing\.key, which does not exist: point it at the file holding the refund hot wallet's 0x private key, or unset it \(refunds then wait\)$/,
    ],
    [{ X402_REFUND_KEY_FILE: dir }, /^X402_REFUND_KEY_FILE names \/.*, which is a directory: point it at/],
    [
      { X402_REFUND_KEY_FILE: wrong },
      /^X402_REFUND_KEY_FILE \/.*\/wrong\.key must be a 0x-prefixed 32-byte hex private key \(the refund hot wallet's\)$/,
    ],
    [
      { X402_REFUND_KEY: secretish },
      /^X402_REFUND_KEY must be a 0x-prefixed 32-byte hex private key \(the refund hot wallet's\)$/,
    ],
  ];
  for (const [env, message] of cases) {
    assert.throws(
      () => configFromEnv(env),
      (e: Error) => e instanceof SettingError && message.test(e.message) && !e.message.includes(secretish.slice(2)),
    );
  }
  const key = `0x${'cd'.repeat(32)}`;
  await writeFile(join(dir, 'good.key'), `${key}\n`);
  assert.equal(configFromEnv({ X402_REFUND_KEY_FILE: join(dir, 'good.key') }).refunds.privateKey, key);
  const run = await cli(['serve'], { DATA_DIR: dir, X402_REFUND_KEY_FILE: join(dir, 'missing.key') }, 30_000);
  assert.equal(run.code, 1);
  assert.match(run.stderr, /^error: X402_REFUND_KEY_FILE names \/.*missing\.key, which does not exist: [^\n]*\n$/);
});

test("refunds are signed for the network's USDC domain, as payments are: USDC on Base Sepolia", async () => {
  const signed: Record<string, unknown> = {};
  for (const name of ['base', 'base-sepolia']) {
    const settings = configFromEnv({
      AUDIO_API_ENV: 'production',
      X402_NETWORK: name,
      X402_PAY_TO: '0x976EA74026E726554dB657fA54763abd0C3a0aa9',
      X402_FACILITATOR_URL: 'http://127.0.0.1:9',
      X402_RPC_URL: 'http://127.0.0.1:9',
    }).payments;
    const made = await payments({
      production: true,
      dataDir: await scratchDir('audio-refund-domain-'),
      log: jsonLogger({}, { level: 'silent' }),
      settings,
      refundKey: `0x${'11'.repeat(32)}`,
    });
    const config = (made.refunds.wallet as unknown as { config: { tokenName: string; tokenVersion: string } }).config;
    signed[name] = { name: config.tokenName, version: config.tokenVersion };
    await made.stop();
  }
  assert.deepEqual(signed, {
    base: { name: 'USD Coin', version: '2' },
    'base-sepolia': { name: 'USDC', version: '2' },
  });
});
