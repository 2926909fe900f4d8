import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Where an instance's Icecast sends its callbacks and the credentials it sends (from the icecast.xml serve wrote). */
export interface CallbackEndpoint {
  base: string;
  authorization: string;
}

export async function callbackEndpoint(dataDir: string): Promise<CallbackEndpoint> {
  const xml = await readFile(join(dataDir, 'icecast', 'icecast.xml'), 'utf8');
  // With ICECAST_PROXY=haproxy Icecast calls nothing back: HAProxy's Lua holds the callback server and credentials.
  if (!xml.includes('<option name="stream_auth"')) return proxiedEndpoint(dataDir);
  const option = (name: string) => new RegExp(`<option name="${name}" value="([^"]*)"/>`).exec(xml)![1];
  const user = option('username');
  const password = option('password').replace(/&amp;/g, '&');
  return {
    base: option('stream_auth').replace(/\/stream_auth$/, ''),
    authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`,
  };
}

/** The callback server and credentials HAProxy's admission Lua asks with (src/provisioning/haproxy-admission.ts). */
async function proxiedEndpoint(dataDir: string): Promise<CallbackEndpoint> {
  const lua = await readFile(join(dataDir, 'haproxy', 'admission.lua'), 'utf8');
  const [, url, authorization] =
    /local URL, SOURCE_URL = "([^"]+)"[\s\S]*?local AUTHORIZATION, TIMEOUT = "([^"]+)"/.exec(lua)!;
  return { base: url.replace(/\/proxy_listener_add$/, ''), authorization };
}

/**
 * One listener callback as Icecast makes it; true when the answer admits. A 500 is no decision (serve's query gave up,
 * e.g. HOST_QUERY_TIMEOUT_MS on a loaded machine): Icecast refuses that listener and the player comes back, as this
 * asks again up to `tries` times in all.
 */
export async function listenerCallback(
  endpoint: CallbackEndpoint,
  action: 'listener_add' | 'listener_remove',
  listener: { mount: string; client: number; ip: string; agent: string },
  tries = 1,
): Promise<boolean> {
  const form = new URLSearchParams({
    action,
    server: '127.0.0.1',
    port: '8000',
    client: String(listener.client),
    mount: listener.mount,
    user: '',
    pass: '',
    ip: listener.ip,
    agent: listener.agent,
    ...(action === 'listener_remove' && { duration: '1' }),
  });
  for (let tried = 1; ; tried++) {
    const answer = await fetch(`${endpoint.base}/${action}`, {
      method: 'POST',
      headers: { authorization: endpoint.authorization, 'content-type': 'application/x-www-form-urlencoded' },
      body: form,
    });
    await answer.arrayBuffer();
    if (answer.status === 500 && tried < tries) {
      console.log(`${action} ${listener.mount}: no decision (500), asked again`);
      await new Promise((resolve) => setTimeout(resolve, 200));
      continue;
    }
    assert.equal(answer.status, 200);
    return answer.headers.get('icecast-auth-user') === '1';
  }
}
