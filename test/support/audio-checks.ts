import { readdirSync, readFileSync } from 'node:fs';

/** Audio-check processes (ffprobe, or ffmpeg test-decoding to null) that descend from this process. */
export function audioChecks(root: number): number {
  const parents = new Map<number, number>();
  const commands = new Map<number, string>();
  for (const name of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      parents.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
      commands.set(Number(name), readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' '));
    } catch {
      /* gone meanwhile */
    }
  }
  const descends = (pid: number): boolean => {
    for (let p = parents.get(pid); p !== undefined && p > 1; p = parents.get(p)) if (p === root) return true;
    return false;
  };
  // The AutoDJ's own ffprobe (tags of the next track) uses -show_entries; the upload check -show_format and -progress.
  return [...commands].filter(
    ([pid, cmd]) => /(^|\/)ffprobe .*-show_format|(^|\/)ffmpeg .*-progress/.test(cmd) && descends(pid),
  ).length;
}
