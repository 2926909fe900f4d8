// A node:test reporter that prints how long each test FILE took, slowest first, and the run's wall time.
// Use it next to the usual reporter, e.g.:
//   npx tsx --test --test-reporter=spec --test-reporter-destination=stdout \
//     --test-reporter=./scripts/test-file-times.mjs --test-reporter-destination=stderr test/*.test.ts
// A file's time is its process's, as the runner reports it (the file's own top-level test, boot included); a file
// run in this process (no --test isolation) falls back to its first test's start to its last test's end.
import { relative, resolve } from 'node:path';

/** A file of the test bundle (FOLDER/test/x.test.js) by the name of its source (test/x.test.ts). */
export function sourceName(folder, file) {
  const inside = relative(folder, resolve(file));
  return inside.startsWith('..') ? file : inside.replace(/\.js$/, '.ts');
}

/** Each file's wall time and test counts, slowest first, from a run's events; and when the run started. */
export async function collectFileTimes(source, displayName = (file) => file) {
  const startedAt = Date.now();
  const files = new Map();
  const entry = (file) => {
    if (!files.has(file)) files.set(file, { first: Infinity, last: 0, own: undefined, tests: 0, failed: 0 });
    return files.get(file);
  };
  for await (const event of source) {
    const data = event.data ?? {};
    if (!data.file) continue;
    // Events name their file as given or as an absolute path, depending on where they come from.
    const file = displayName(relative(process.cwd(), resolve(data.file)));
    const times = entry(file);
    if (event.type === 'test:dequeue' || event.type === 'test:start') times.first = Math.min(times.first, Date.now());
    if (event.type !== 'test:complete' && event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    times.last = Math.max(times.last, Date.now());
    const fileLevel = data.name === data.file || data.name === file;
    if (data.nesting === 0 && fileLevel) times.own = data.details?.duration_ms;
    else if (event.type !== 'test:complete' && !data.details?.type) {
      times.tests += 1;
      if (event.type === 'test:fail') times.failed += 1;
    }
  }
  const rows = [...files].map(([file, times]) => ({
    ...times,
    file,
    ms: times.own ?? times.last - times.first,
  }));
  rows.sort((a, b) => b.ms - a.ms);
  return { rows, startedAt };
}

/** The table the reporter prints: each file's time, slowest first, then the sum and the run's wall time. */
export function fileTimesText({ rows, startedAt }) {
  const seconds = (ms) => (ms / 1000).toFixed(1).padStart(7);
  let text = '\nper-file wall time (slowest first):\n';
  for (const row of rows) {
    const failed = row.failed ? `, ${row.failed} failed` : '';
    const from = seconds(row.first - startedAt).trim();
    text += `${seconds(row.ms)} s  ${row.file}  (${row.tests} tests${failed}; from ${from} s)\n`;
  }
  const sum = rows.reduce((total, row) => total + row.ms, 0);
  const wall = seconds(Date.now() - startedAt).trim();
  return `${text}${seconds(sum)} s  sum over ${rows.length} files; ${wall} s wall for the run\n`;
}

export default async function* fileTimes(source, displayName = (file) => file) {
  yield fileTimesText(await collectFileTimes(source, displayName));
}
