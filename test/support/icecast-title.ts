import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Sets the title of a mount on a serve's own Icecast directly, with its admin credentials (as updinfo would). */
export async function setIcecastTitle(host: { dataDir: string }, mount: string, title: string): Promise<void> {
  const names = (await readdir(host.dataDir, { recursive: true })) as string[];
  const config = await readFile(join(host.dataDir, names.find((name) => name.endsWith('icecast.xml'))!), 'utf8');
  const value = (tag: string) => new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(config)![1];
  const query = new URLSearchParams({ mount, mode: 'updinfo', song: title });
  const credentials = Buffer.from(`${value('admin-user')}:${value('admin-password')}`).toString('base64');
  const answer = await fetch(`http://127.0.0.1:${value('port')}/admin/metadata?${query}`, {
    headers: { authorization: `Basic ${credentials}` },
    signal: AbortSignal.timeout(10_000),
  });
  assert.equal(answer.status, 200, await answer.text());
}
