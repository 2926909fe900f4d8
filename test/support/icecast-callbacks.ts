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
  const option = (name: string) => new RegExp(`<option name="${name}" value="([^"]*)"/>`).exec(xml)![1];
  const user = option('username');
  const password = option('password').replace(/&amp;/g, '&');
  return {
    // stream_auth is asked in every mode (with ICECAST_PROXY=haproxy Icecast asks no listener_add).
    base: option('stream_auth').replace(/\/stream_auth$/, ''),
    authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`,
  };
}

/** One listener callback as Icecast makes it; true when the answer admits. */
export async function listenerCallback(
  endpoint: CallbackEndpoint,
  action: 'listener_add' | 'listener_remove',
  listener: { mount: string; client: number; ip: string; agent: string },
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
  const answer = await fetch(`${endpoint.base}/${action}`, {
    method: 'POST',
    headers: { authorization: endpoint.authorization, 'content-type': 'application/x-www-form-urlencoded' },
    body: form,
  });
  await answer.arrayBuffer();
  assert.equal(answer.status, 200);
  return answer.headers.get('icecast-auth-user') === '1';
}
