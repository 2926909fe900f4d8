import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseXml } from '../../src/provisioning/index.js';

/** Sets the title of a mount on a serve's own Icecast directly, with its admin credentials (as updinfo would). */
export async function setIcecastTitle(host: { dataDir: string }, mount: string, title: string): Promise<void> {
  const query = new URLSearchParams({ mount, mode: 'updinfo', song: title });
  const answer = await icecastAdmin(host, `/admin/metadata?${query}`);
  assert.equal(answer.status, 200, await answer.text());
}

/** The mount's title as its Icecast's /admin/stats shows it; undefined while the mount has none (or no source). */
export async function icecastTitle(host: { dataDir: string }, mount: string): Promise<string | undefined> {
  const stats = parseXml(await (await icecastAdmin(host, `/admin/stats?mount=${encodeURIComponent(mount)}`)).text());
  const source = stats.children.find((e) => e.name === 'source');
  return source?.children.find((e) => e.name === 'title')?.text;
}

/** An admin request to a serve's own Icecast on its loopback port (the public port takes none but title updates). */
async function icecastAdmin(host: { dataDir: string }, path: string): Promise<Response> {
  const names = (await readdir(host.dataDir, { recursive: true })) as string[];
  const config = await readFile(join(host.dataDir, names.find((name) => name.endsWith('icecast.xml'))!), 'utf8');
  const value = (tag: string) => new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(config)![1];
  const credentials = Buffer.from(`${value('admin-user')}:${value('admin-password')}`).toString('base64');
  return fetch(`http://127.0.0.1:${value('port')}${path}`, {
    headers: { authorization: `Basic ${credentials}` },
    signal: AbortSignal.timeout(10_000),
  });
}
