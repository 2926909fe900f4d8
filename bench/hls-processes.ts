import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { treeCpu } from './process-cpu.js';

/** The first process whose command line starts with `name` and mentions `path`. */
async function processOf(name: string, path: string): Promise<number | undefined> {
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const args = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (args.startsWith(name) && args.includes(path)) return Number(entry);
  }
  return undefined;
}

/** The segmenter's ffmpeg (below serve, writing into DATA_DIR/hls). */
export async function segmenterPid(dataDir: string): Promise<number> {
  const pid = await processOf('ffmpeg', join(dataDir, 'hls'));
  if (pid === undefined) throw new Error('no HLS segmenter running');
  return pid;
}

/** nginx serving the segments (src/provisioning/hls-file-server.ts), if it runs. */
export function segmentServerPid(dataDir: string): Promise<number | undefined> {
  return processOf('nginx', join(dataDir, 'hls-file-server'));
}

/** The process's own CPU seconds so far. */
export async function cpuOf(pid: number): Promise<number> {
  return (await treeCpu(pid))?.self ?? NaN;
}

/** The newest segment's number, from the rendition's own playlist file (read without taking a listener place). */
export async function newestSegment(dir: string): Promise<number> {
  // ffmpeg renames a new playlist over the old one, and a segmenter that reconnects renews the directory.
  let playlist = '';
  for (let tries = 0; !playlist.includes('#EXTINF') && tries < 50; tries++) {
    playlist = await readFile(join(dir, 'live.m3u8'), 'utf8').catch(() => '');
    if (!playlist.includes('#EXTINF')) await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const numbers = [...playlist.matchAll(/^seg(\d+)\.ts$/gm)].map((m) => Number(m[1]));
  return Math.max(...numbers);
}
