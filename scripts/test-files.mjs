// Runs test files with node:test's run(), in the order given (`node --test` sorts them by name), with the spec
// reporter and the per-file times on stdout. Started by scripts/test.mjs on the files of the test bundle
// (test/support/test-bundle.ts): run() starts each file in its own process with this process's node options. The
// per-file times name each file by its source (FOLDER/test/x.test.js as test/x.test.ts).
// Usage: node [--enable-source-maps] scripts/test-files.mjs FOLDER CONCURRENCY FILE…
import { PassThrough } from 'node:stream';
import { finished } from 'node:stream/promises';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import fileTimes, { sourceName } from './test-file-times.mjs';

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
const times = (async () => {
  let text = '';
  for await (const chunk of fileTimes(forTimes, (file) => sourceName(folder, file))) text += chunk;
  return text;
})();
const report = forSpec.compose(new spec());
report.pipe(process.stdout, { end: false });
await finished(report);
process.stdout.write(await times);
