import { execFile } from 'node:child_process';

/**
 * The playing time of an audio file, read by ffmpeg through every packet (a file written as it streamed has no
 * header that says it, and an estimate from the bitrate is wrong for variable bitrates). Seconds, 0 when none.
 */
export function audioDuration(file: string, timeoutMs = 120_000): Promise<number> {
  const args = ['-nostdin', '-v', 'error', '-i', file, '-map', '0:a:0', '-c', 'copy', '-f', 'null', '-'];
  return new Promise((resolve) => {
    execFile(
      'ffmpeg',
      ['-progress', 'pipe:1', '-nostats', ...args],
      { timeout: timeoutMs, maxBuffer: 4 * 1024 * 1024 },
      (_err, stdout) => {
        const times = [...String(stdout).matchAll(/^out_time_us=(\d+)$/gm)].map((m) => Number(m[1]));
        resolve(times.length ? times[times.length - 1] / 1e6 : 0);
      },
    );
  });
}
