import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { outputOf } from './child-output.js';

/**
 * npm packages installed into a folder of their own, for real clients that cannot go into our package.json: their peer
 * dependencies conflict with ours (agentcash), or they bring hundreds of MB (x402 v1 clients, Prism). The folder is
 * kept under the system's temporary folder, named after what it holds, so that later runs on this machine reuse it.
 */
export async function npmScratch(name: string, packages: string[], flags: string[] = []): Promise<string> {
  const id = createHash('sha256')
    .update(JSON.stringify([packages, flags]))
    .digest('hex')
    .slice(0, 12);
  const dir = join(tmpdir(), `agent-audio-npm-${name}-${id}`);
  if (existsSync(join(dir, '.installed'))) return dir;
  const building = await mkdtemp(join(tmpdir(), `agent-audio-npm-${name}-building-`));
  try {
    await writeFile(
      join(building, 'package.json'),
      JSON.stringify({ name: `scratch-${name}`, private: true, type: 'module' }),
    );
    await run(
      'npm',
      ['install', '--no-audit', '--no-fund', '--loglevel=error', ...flags, ...packages],
      building,
      540_000,
    );
    await writeFile(join(building, '.installed'), `${packages.join(' ')}\n`);
    // Another run may have finished first: then its folder is used and this one dropped.
    await rename(building, dir).catch(async () => {
      await rm(building, { recursive: true, force: true });
    });
  } catch (error) {
    await rm(building, { recursive: true, force: true });
    throw error;
  }
  return dir;
}

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end (killed after timeoutMs) and collects its output. */
export async function run(
  command: string,
  args: string[],
  cwd: string,
  timeoutMs = 120_000,
  env: Record<string, string> = {},
): Promise<Ran> {
  const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const ran = await outputOf(child, `${command} ${args.join(' ')}`, timeoutMs);
  if (command === 'npm' && ran.code !== 0)
    throw new Error(`npm ${args.join(' ')} failed (${ran.code}):\n${ran.stderr.slice(-2000)}`);
  return ran;
}
