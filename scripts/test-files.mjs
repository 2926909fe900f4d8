// Runs test files with node:test's run(), in the order given (`node --test` sorts them by name), with the spec
// reporter and the per-file times on stdout. Started by scripts/test.mjs on the files of the test bundle
// (test/support/test-bundle.ts): run() starts each file in its own process with this process's node options. The
// per-file times name each file by its source (FOLDER/test/x.test.js as test/x.test.ts). With TEST_FILE_TIMES=record
// (a run of every file) the times of the files that passed are kept in test/file-times.json for the next run's order.
// Usage: node [--enable-source-maps] scripts/test-files.mjs FOLDER CONCURRENCY FILE…
import { PassThrough } from 'node:stream';
import { finished } from 'node:stream/promises';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import { collectFileTimes, fileTimesText, sourceName } from './test-file-times.mjs';
import { mergedTimes, readTimes, writeTimes } from './test-order.mjs';

const [folder, concurrency, ...files] = process.argv.slice(2);
const tests = run({ files, concurrency: Number(concurrency), timeout: 600_000 });

// Both reporters read every event: one stream each, fed from the run's.
const forSpec = new PassThrough({ objectMode: true });
const forTimes = new PassThrough({ objectMode: true });
tests.on('data', (event) => {
  if (event.type === 'test:fail') process.exitCode = 1;
  forSpec.write(event);
  forTimes.write(event);
});
tests.on('end', () => {
  forSpec.end();
  forTimes.end();
});
const times = collectFileTimes(forTimes, (file) => sourceName(folder, file));
const report = forSpec.compose(new spec());
report.pipe(process.stdout, { end: false });
await finished(report);
const measured = await times;
process.stdout.write(fileTimesText(measured));
if (process.env.TEST_FILE_TIMES === 'record') {
  const passed = new Map(measured.rows.filter((row) => !row.failed).map((row) => [row.file, row.ms]));
  const ran = files.map((file) => sourceName(folder, file));
  writeTimes(mergedTimes(readTimes(), passed, ran));
}
