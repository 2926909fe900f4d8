/**
 * Sources for the capacity benchmarks: a CBR MP3 made by ffmpeg, replayed at real-time pace on every broadcast URL
 * by raw source clients in a child process of their own (bench/streaming-sources.ts).
 */
import { spawn, spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stopProcess } from './streaming.js';

export interface Sources {
  admitted: number;
  refused: number;
  stop(): Promise<void>;
}

function makeMp3(kbps: number): string {
  const mp3 = join(tmpdir(), `bench-sources-${process.pid}-${kbps}k.mp3`);
  const made = spawnSync('ffmpeg', [
    ...['-nostdin', '-v', 'error', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=20', '-ac', '1'],
    ...['-ar', '44100', '-c:a', 'libmp3lame', '-b:a', `${kbps}k`, '-write_xing', '0', '-id3v2_version', '0'],
    ...['-f', 'mp3', '-y', mp3],
  ]);
  if (made.status !== 0) throw new Error(`ffmpeg could not make the test MP3: ${made.stderr}`);
  return mp3;
}

export async function startMp3Sources(root: string, urls: string[], kbps: number): Promise<Sources> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(root, 'bench/streaming-sources.ts'), makeMp3(kbps), String(kbps * 125), ...urls],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stderr!.on('data', (d) => {
    out = (out + d).slice(-4000);
  });
  try {
    const [admitted, refused] = await new Promise<[number, number]>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the sources did not connect within 120 s:\n${out}`)), 120_000);
      child.stdout!.on('data', (d) => {
        const ready = /^ready (\d+) (\d+)/m.exec(String(d));
        if (ready) {
          clearTimeout(timer);
          resolve([Number(ready[1]), Number(ready[2])]);
        }
      });
      child.once('exit', (code) => reject(new Error(`the sources child exited with ${code}:\n${out}`)));
    });
    return { admitted, refused, stop: () => stopProcess(child) };
  } catch (e) {
    await stopProcess(child);
    throw e;
  }
}
