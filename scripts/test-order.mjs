// The order `npm test` starts its files in: slowest first by the times measured in earlier runs, kept in
// test/file-times.json, so that no long file starts last and runs alone at the end. A full `npm test` writes the file
// again (scripts/test-files.mjs); nobody edits it by hand.
import { readFileSync, writeFileSync } from 'node:fs';

export const TIMES_FILE = 'test/file-times.json';

const ABOUT =
  "Written by npm test after a run of every test file: each file's wall time in ms (the mean of the last two runs " +
  'it passed in), read by scripts/test-order.mjs to start the slowest first, and beside it (cpu_ms) the CPU of its ' +
  'process and the descendants it waited for (`node scripts/test.mjs --times` prints both). Generated: do not edit.';

/**
 * The recorded times by file name (test/x.test.ts), none when there is no file; `measured` is false while they are
 * the ranks the file was seeded with rather than times.
 */
export function readTimes(path = TIMES_FILE) {
  try {
    const { ms, measured } = JSON.parse(readFileSync(path, 'utf8'));
    const times = new Map(Object.entries(ms ?? {}).filter(([, value]) => Number.isFinite(value)));
    return { times, measured: measured === true };
  } catch {
    return { times: new Map(), measured: false };
  }
}

/**
 * The files in the order to start them: those with no recorded time first (a new file may be long, and it is the one
 * most likely to fail), by name; then the rest slowest first, ties by name.
 */
export function slowestFirst(files, times) {
  const byName = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
  const unknown = files.filter((file) => !times.has(file)).sort(byName);
  const known = files.filter((file) => times.has(file));
  known.sort((a, b) => times.get(b) - times.get(a) || byName(a, b));
  return [...unknown, ...known];
}

/**
 * The times to keep after a run of every file: each file that passed, its measured time averaged with the one kept
 * (one slow run on a loaded machine moves a file half way); a file that failed keeps its time; files gone are dropped.
 */
export function mergedTimes(previous, measured, files) {
  const merged = {};
  for (const file of [...files].sort()) {
    const before = previous.times.get(file);
    const now = measured.get(file);
    const ms = now === undefined ? before : before === undefined || !previous.measured ? now : (before + now) / 2;
    if (ms !== undefined) merged[file] = Math.round(ms / 100) * 100;
  }
  return merged;
}

/** Each file's CPU in ms as kept beside its wall time (scripts/child-cpu.mjs measures it), none before a run kept it. */
export function readCpu(path = TIMES_FILE) {
  try {
    const { cpu_ms } = JSON.parse(readFileSync(path, 'utf8'));
    return new Map(Object.entries(cpu_ms ?? {}).filter(([, value]) => Number.isFinite(value)));
  } catch {
    return new Map();
  }
}

export function writeTimes(ms, path = TIMES_FILE, cpuMs = undefined) {
  const kept = { about: ABOUT, measured: true, ms, ...(cpuMs && { cpu_ms: cpuMs }) };
  writeFileSync(path, `${JSON.stringify(kept, null, 2)}\n`);
}
