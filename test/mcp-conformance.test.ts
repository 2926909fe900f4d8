import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { configFromEnv } from '../src/cli/config.js';
import { root, runNode, scratchDir, startService, type Service } from './support/service.js';

/**
 * The MCP endpoint against the MCP conformance suite (@modelcontextprotocol/conformance, pinned to 0.1.13: 0.1.14 and
 * later need Node 22) and its DNS rebinding protection. The service is reached under its public name too
 * (PUBLIC_BASE_URL) and allows one more browser origin (MCP_ALLOWED_ORIGINS).
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

describe('MCP conformance and DNS rebinding protection', () => {
  test("the conformance suite's server scenarios pass, but for capabilities this server does not advertise", {
    timeout: 400_000,
  }, async () => {
    const listed = await conformance(['list']);
    const scenarios = [...listed.stdout.split('Client scenarios')[0].matchAll(/^\s+- (\S+)$/gm)].map((m) => m[1]);
    assert.ok(scenarios.includes('dns-rebinding-protection') && scenarios.includes('tools-list'), listed.stdout);
    for (const name of Object.keys(EXCLUDED))
      assert.ok(scenarios.includes(name), `excluded ${name} is a scenario of the suite`);

    const out = await scratchDir('mcp-conformance-');
    await conformance(['server', '--url', mcpUrl.href, '--suite', 'all', '-o', out]);
    const checksOf = new Map<string, { id: string; status: string; errorMessage?: string }[]>();
    for (const dir of await readdir(out)) {
      const scenario = /^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$/.exec(dir)![1];
      checksOf.set(scenario, JSON.parse(await readFile(join(out, dir, 'checks.json'), 'utf8')));
    }
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
