import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/** What ffmpeg writes to its standard output with these arguments; it runs without blocking the test process. */
export async function ffmpegOutput(args: string[]): Promise<Buffer> {
  const { stdout } = await execFileAsync('ffmpeg', ['-v', 'error', ...args], {
    encoding: 'buffer',
    maxBuffer: 64 * 1024 * 1024,
  });
  return stdout;
}

/** A tone of `seconds` made by ffmpeg, tagged with this title (artist "Test Band"), encoded as `encoding` says. */
export function tone(seconds: number, title: string, encoding: string[]): Promise<Buffer> {
  return ffmpegOutput([
    '-f',
    'lavfi',
    '-i',
    `sine=frequency=523:duration=${seconds}`,
    '-metadata',
    `title=${title}`,
    '-metadata',
    'artist=Test Band',
    ...encoding,
    'pipe:1',
  ]);
}
