import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { configFromEnv } from '../src/cli/config.js';
import { npmScratch, run } from './support/npm-scratch.js';
import { root, runNode, scratchDir, startService, type Service } from './support/service.js';

/**
 * The MCP endpoint against the MCP conformance suite and its DNS rebinding protection. The 2025 eras: the suite 0.1.13
 * (a devDependency, the last release that runs on Node 20) and 0.1.16 (under Node 22). The 2026-07-28 revision: the
 * suite 0.2.0-alpha.12, the first with its scenarios (0.1.16 has none), under Node 22. Those under Node 22 are
 * installed from npm into a folder of their own. The service is reached under its public name too (PUBLIC_BASE_URL)
 * and allows one more browser origin (MCP_ALLOWED_ORIGINS).
 */
const PUBLIC_ORIGIN = 'https://audio.example.com';
const ALLOWED_ORIGIN = 'https://inspector.example.com';

/**
 * Server scenarios left out, each for a capability or behaviour this server does not offer. The server advertises
 * only `tools` (tools/list, tools/call) and answers each POST with one JSON response, statelessly: it sends no
 * requests or notifications to the client. Every other scenario of the suite must pass.
 */
const EXCLUDED: Record<string, string> = {
  'logging-set-level': 'the logging capability is not advertised',
  'tools-call-with-logging': 'the logging capability is not advertised (the scenario needs log notifications)',
  'completion-complete': 'the completions capability is not advertised',
  'tools-call-with-progress': 'progress notifications are optional (MAY); a stateless JSON answer sends none',
  'tools-call-sampling': 'a server-to-client request (sampling/createMessage): the stateless endpoint makes none',
  'tools-call-elicitation': 'a server-to-client request (elicitation/create): the stateless endpoint makes none',
  'elicitation-sep1034-defaults': 'a server-to-client request (elicitation/create): the stateless endpoint makes none',
  'elicitation-sep1330-enums': 'a server-to-client request (elicitation/create): the stateless endpoint makes none',
  'tools-call-image': "calls the suite's fixture tool test_image_content; no tool of this API returns image content",
  'tools-call-audio': "calls the suite's fixture tool test_audio_content; no tool of this API returns audio content",
  'tools-call-embedded-resource':
    "calls the suite's fixture tool test_embedded_resource; the resources capability is not advertised",
  'tools-call-mixed-content':
    "calls the suite's fixture tool test_multiple_content_types (image and resource content); none of this API's tools returns them",
  'json-schema-2020-12':
    "looks for the suite's fixture tool json_schema_2020_12_tool (pending scenario); this API's tools publish their own schemas",
  'resources-list': 'the resources capability is not advertised',
  'resources-read-text': 'the resources capability is not advertised',
  'resources-read-binary': 'the resources capability is not advertised',
  'resources-templates-read': 'the resources capability is not advertised',
  'resources-subscribe': 'the resources capability is not advertised',
  'resources-unsubscribe': 'the resources capability is not advertised',
  'prompts-list': 'the prompts capability is not advertised',
  'prompts-get-simple': 'the prompts capability is not advertised',
  'prompts-get-with-args': 'the prompts capability is not advertised',
  'prompts-get-embedded-resource': 'the prompts capability is not advertised',
  'prompts-get-with-image': 'the prompts capability is not advertised',
};

/** The last 2025-era suite, which needs Node 22; the test installs them (once per machine). */
const SUITE_2025_NODE_22 = ['@modelcontextprotocol/conformance@0.1.16', 'node@22'];

/** The modern suite and the Node it needs; the test installs them (once per machine). */
const MODERN_SUITE = ['@modelcontextprotocol/conformance@0.2.0-alpha.12', 'node@22'];

/**
 * 2026-07-28 scenarios left out, as for the 2025 eras: each needs a capability this server does not advertise, a
 * fixture tool of the suite, or multi-round input requests (elicitation, sampling, roots), which none of this API's
 * tools asks a client for.
 */
const MODERN_EXCLUDED: Record<string, string> = {
  'completion-complete': EXCLUDED['completion-complete'],
  'tools-call-image': EXCLUDED['tools-call-image'],
  'tools-call-audio': EXCLUDED['tools-call-audio'],
  'tools-call-embedded-resource': EXCLUDED['tools-call-embedded-resource'],
  'tools-call-mixed-content': EXCLUDED['tools-call-mixed-content'],
  'tools-call-with-progress': EXCLUDED['tools-call-with-progress'],
  'json-schema-2020-12': EXCLUDED['json-schema-2020-12'],
  'http-custom-header-server-validation':
    'needs a tool whose input schema carries x-mcp-header annotations; none of these tools mirrors an argument into a header',
  ...Object.fromEntries(
    [
      'resources-list',
      'resources-read-text',
      'resources-read-binary',
      'resources-templates-read',
      'prompts-list',
      'prompts-get-simple',
      'prompts-get-with-args',
      'prompts-get-embedded-resource',
      'prompts-get-with-image',
    ].map((name) => [name, EXCLUDED[name]]),
  ),
  ...Object.fromEntries(
    [
      'basic-elicitation',
      'basic-sampling',
      'basic-list-roots',
      'request-state',
      'multiple-input-requests',
      'multi-round',
      'non-tool-request',
      'result-type',
      'tampered-state',
      'capability-check',
    ].map((name) => [
      `input-required-result-${name}`,
      'no tool of this API asks the client for input (elicitation, sampling, roots): every call is answered in one result',
    ]),
  ),
};

/** Single checks of scenarios that otherwise run, left out for the same reasons. */
const MODERN_EXCLUDED_CHECKS: Record<string, string> = {
  'sep-2575-server-rejects-undeclared-capability':
    "calls the suite's fixture tool test_missing_capability; here an unknown tool is a tool_not_found tool error",
  'sep-2575-missing-capability-http-400': "needs the suite's fixture tool test_missing_capability",
  'sep-2549-prompts-list-caching-hints': 'the prompts capability is not advertised',
  'sep-2549-resources-list-caching-hints': 'the resources capability is not advertised',
  'sep-2549-resources-templates-list-caching-hints': 'the resources capability is not advertised',
};

let service: Service;
let mcpUrl: URL;

before(async () => {
  service = await startService({ PUBLIC_BASE_URL: PUBLIC_ORIGIN, MCP_ALLOWED_ORIGINS: ALLOWED_ORIGIN });
  mcpUrl = new URL(`${service.baseUrl}/mcp`);
});
after(() => service?.stop());

const conformance = (args: string[]) =>
  runNode([join(root, 'node_modules/@modelcontextprotocol/conformance/dist/index.js'), ...args], {}, 300_000);

/** A POST of tools/list with these Host and Origin headers (fetch cannot set Host). */
function post(headers: { host?: string; origin?: string }): Promise<{ status: number; body: any }> {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      mcpUrl,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'content-length': Buffer.byteLength(body),
          host: headers.host ?? mcpUrl.host,
          ...(headers.origin && { origin: headers.origin }),
        },
      },
      (res) => {
        let text = '';
        res.on('data', (d) => {
          text += d;
        });
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A 2025-era suite's server scenarios against the endpoint: every one it lists passes, but for EXCLUDED. */
async function passes2025Suite(suite: (args: string[]) => Promise<{ stdout: string }>): Promise<void> {
  const listed = await suite(['list']);
  const scenarios = [...listed.stdout.split('Client scenarios')[0].matchAll(/^\s+- (\S+)(?: \[[^\]]*\])?$/gm)].map(
    (m) => m[1],
  );
  assert.ok(scenarios.includes('dns-rebinding-protection') && scenarios.includes('tools-list'), listed.stdout);
  for (const name of Object.keys(EXCLUDED))
    assert.ok(scenarios.includes(name), `excluded ${name} is a scenario of the suite`);

  const out = await scratchDir('mcp-conformance-');
  await suite(['server', '--url', mcpUrl.href, '--suite', 'all', '-o', out]);
  const checksOf = await checksIn(out);
  const ran = scenarios.filter((s) => !(s in EXCLUDED));
  assert.ok(ran.length >= 6, `${ran}`);
  for (const scenario of ran) {
    const checks = checksOf.get(scenario);
    assert.ok(checks, `scenario ${scenario} ran`);
    const failed = checks.filter((c) => c.status === 'FAILURE');
    assert.deepEqual(failed, [], `${scenario}: ${JSON.stringify(failed)}`);
  }
  const rebinding = checksOf.get('dns-rebinding-protection')!;
  assert.deepEqual(rebinding.map((c) => [c.id, c.status]).sort(), [
    ['localhost-host-rebinding-rejected', 'SUCCESS'],
    ['localhost-host-valid-accepted', 'SUCCESS'],
  ]);
}

describe('MCP conformance and DNS rebinding protection', () => {
  test(
    "the conformance suite's server scenarios pass, but for capabilities this server does not advertise",
    {
      timeout: 400_000,
    },
    () => passes2025Suite(conformance),
  );

  test('the suite 0.1.16 (under Node 22) passes its 2025 server scenarios too, but for the same capabilities', {
    timeout: 900_000,
  }, async () => {
    const dir = await npmScratch('mcp-conformance', SUITE_2025_NODE_22);
    const node = join(dir, 'node_modules/node/bin/node');
    const suite = join(dir, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
    await passes2025Suite((args) => run(node, [suite, ...args], root, 600_000));
  });

  test('the 2026-07-28 scenarios of the suite pass under Node 22, but for what this server does not offer', {
    timeout: 900_000,
  }, async () => {
    const dir = await npmScratch('mcp-conformance', MODERN_SUITE);
    const node = join(dir, 'node_modules/node/bin/node');
    const suite = join(dir, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
    const out = await scratchDir('mcp-conformance-modern-');
    const args = ['server', '--url', mcpUrl.href, '--spec-version', '2026-07-28', '--suite', 'all', '-o', out];
    const ran = await run(node, [suite, ...args], root, 600_000);
    assert.match(ran.stdout, /=== SUMMARY ===/, ran.stderr.slice(-2000));
    const checksOf = await checksIn(out);
    for (const name of [...Object.keys(MODERN_EXCLUDED), 'server-stateless', 'caching', 'tools-list'])
      assert.ok(checksOf.has(name), `${name} is a 2026-07-28 scenario of the suite`);
    for (const [scenario, checks] of checksOf) {
      if (scenario in MODERN_EXCLUDED) continue;
      const failed = checks.filter((c) => c.status === 'FAILURE' && !(c.id in MODERN_EXCLUDED_CHECKS));
      assert.deepEqual(failed, [], `${scenario}: ${JSON.stringify(failed)}`);
    }
    const passed = (scenario: string) =>
      checksOf
        .get(scenario)!
        .filter((c) => c.status === 'SUCCESS')
        .map((c) => c.id);
    assert.ok(passed('server-stateless').length >= 20, `${passed('server-stateless')}`);
    assert.ok(passed('caching').includes('sep-2549-tools-list-caching-hints'), `${passed('caching')}`);
    assert.ok(passed('http-header-validation').length >= 10, `${passed('http-header-validation')}`);
    assert.deepEqual(passed('dns-rebinding-protection').sort(), [
      'localhost-host-rebinding-rejected',
      'localhost-host-valid-accepted',
    ]);
  });

  test("a foreign Host or Origin gets 403 naming the protection; the service's own names, allowed origins and agents without Origin are answered", async () => {
    const refused = [
      { host: 'evil.example.com', origin: 'http://evil.example.com' },
      { host: 'evil.example.com' },
      { origin: 'http://evil.example.com' },
      { origin: 'http://localhost.evil.example.com' },
      { origin: 'null' },
      { origin: 'https://inspector.example.com:8443' },
    ];
    for (const headers of refused) {
      const answer = await post(headers);
      assert.equal(answer.status, 403, JSON.stringify(headers));
      assert.equal(answer.body.error.code, -32000);
      assert.match(answer.body.error.message, /DNS rebinding protection/);
    }
    const answered = [
      {},
      { origin: `http://${mcpUrl.host}` },
      { host: `localhost:${mcpUrl.port}`, origin: 'http://localhost:6274' },
      { host: 'audio.example.com', origin: PUBLIC_ORIGIN },
      { origin: ALLOWED_ORIGIN },
      { host: `[::1]:${mcpUrl.port}` },
    ];
    for (const headers of answered) {
      const answer = await post(headers);
      assert.equal(answer.status, 200, `${JSON.stringify(headers)}: ${JSON.stringify(answer.body)}`);
      assert.ok(answer.body.result.tools.length > 0);
    }
  });

  test('MCP_ALLOWED_ORIGINS takes web origins separated by commas and refuses anything else', () => {
    assert.deepEqual(
      configFromEnv({ MCP_ALLOWED_ORIGINS: ' https://a.example.com, http://localhost:6274/ ' }).mcpAllowedOrigins,
      ['https://a.example.com', 'http://localhost:6274'],
    );
    assert.deepEqual(configFromEnv({}).mcpAllowedOrigins, []);
    for (const wrong of [
      'https://a.example.com/path',
      'ftp://a.example.com',
      'a.example.com',
      'https://a.example.com?x=1',
    ]) {
      assert.throws(
        () => configFromEnv({ MCP_ALLOWED_ORIGINS: wrong }),
        /MCP_ALLOWED_ORIGINS must be web origins/,
        wrong,
      );
    }
  });
});

type Check = { id: string; status: string; errorMessage?: string };

/** The checks of each scenario the suite ran, from its output folder (one folder per scenario). */
async function checksIn(out: string): Promise<Map<string, Check[]>> {
  const checksOf = new Map<string, Check[]>();
  for (const dir of await readdir(out)) {
    const scenario = /^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$/.exec(dir)![1];
    checksOf.set(scenario, JSON.parse(await readFile(join(out, dir, 'checks.json'), 'utf8')));
  }
  return checksOf;
}
