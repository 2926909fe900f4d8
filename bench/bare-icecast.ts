/**
 * The anchor of the listener-capacity benchmark: Icecast 2.4 alone, with the limits serve gives it
 * (src/provisioning/icecast-config.ts) but no URL auth (no callbacks) and no proxy in front. Sources connect with
 * its source password, listeners to its mounts directly.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildIcecastConfig } from '../src/provisioning/icecast-config.js';
import { freePort } from '../src/provisioning/local-ports.js';
import { systemUserIds } from '../src/provisioning/system-user.js';
import { stopProcess } from './streaming.js';

export interface BareIcecast {
  pid: number;
  listenUrl(mount: string): string;
  broadcastUrl(mount: string): string;
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';
const RAISE_LIMIT_AND_EXEC = 'ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -H -n)"; exec "$@"';

function anchorConfig(dir: string, port: number, sourcePassword: string, maxClients: number, maxSources: number) {
  const withAuth = buildIcecastConfig({
    host: HOST,
    port,
    adminUser: 'admin',
    adminPassword: randomBytes(18).toString('base64url'),
    callbackBaseUrl: 'http://127.0.0.1:9',
    dir,
    maxClients,
    maxSources,
  });
  const config = withAuth
    .replace(/ *<mount type="default">[\s\S]*?<\/mount>\n/, '')
    .replace(/<source-password>[^<]*</, `<source-password>${sourcePassword}<`);
  if (config.includes('<authentication type="url">') || !config.includes(sourcePassword))
    throw new Error("serve's Icecast configuration changed shape: the anchor can no longer take its auth out");
  return config;
}

export async function startBareIcecast(maxClients: number, maxSources: number): Promise<BareIcecast> {
  const dir = await mkdtemp(join(tmpdir(), 'bare-icecast-'));
  const owner = systemUserIds('icecast2');
  if (owner) await chown(dir, owner.uid, owner.gid);
  const port = await freePort(HOST);
  const sourcePassword = randomBytes(12).toString('hex');
  await writeFile(join(dir, 'icecast.xml'), anchorConfig(dir, port, sourcePassword, maxClients, maxSources));
  const switchUser = owner ? [`--reuid=${owner.uid}`, `--regid=${owner.gid}`, '--init-groups'] : [];
  const child: ChildProcess = spawn(
    'sh',
    [
      '-c',
      RAISE_LIMIT_AND_EXEC,
      'sh',
      'setpriv',
      ...switchUser,
      '--pdeathsig',
      'SIGKILL',
      '--',
      'icecast2',
      '-c',
      join(dir, 'icecast.xml'),
    ],
    { stdio: 'ignore' },
  );
  await sleep(150); // Icecast 2.4 may crash when asked within milliseconds of its start
  const base = `http://${HOST}:${port}`;
  for (let i = 0; !(await fetch(`${base}/status-json.xsl`).catch(() => undefined)); i++) {
    if (i > 200 || child.exitCode !== null) throw new Error(`the bare Icecast did not start (${dir})`);
    await sleep(50);
  }
  return {
    pid: child.pid!,
    listenUrl: (mount) => `${base}${mount}`,
    broadcastUrl: (mount) => `icecast://source:${sourcePassword}@${HOST}:${port}${mount}`,
    stop: async () => {
      await stopProcess(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
