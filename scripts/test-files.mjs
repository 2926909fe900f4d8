// Runs test files with node:test's run(), in the order given (`node --test` sorts them by name), with the spec
// reporter and the per-file times on stdout. Started by scripts/test.mjs on the files of the test bundle
// (test/support/test-bundle.ts): run() starts each file in its own process with this process's node options. The
// per-file times name each file by its source (FOLDER/test/x.test.js as test/x.test.ts). With TEST_FILE_TIMES=record
// (a run of every file) the times of the files that passed are kept in test/file-times.json for the next run's order,
// each with its CPU (scripts/child-cpu.mjs).
// Usage: node [--enable-source-maps] scripts/test-files.mjs FOLDER CONCURRENCY FILE…
import childProcess from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { PassThrough } from 'node:stream';
import { finished } from 'node:stream/promises';
import { childCpuAccount, trackSpawns } from './child-cpu.mjs';
import { collectFileTimes, fileTimesText, sourceName } from './test-file-times.mjs';
import { mergedTimes, readCpu, readTimes, writeTimes } from './test-order.mjs';
import { runSummary, servicesSummary } from './times-table.mjs';

const [folder, concurrency, ...files] = process.argv.slice(2);
// A file's process is started with its path last; its CPU is known once it exited.
const cpu = childCpuAccount();
trackSpawns(childProcess, cpu, (args) => sourceName(folder, relative(process.cwd(), resolve(`${args.at(-1)}`))));
const { run } = await import('node:test');
const { spec } = await import('node:test/reporters');
// The services the files start write what they cost here (test/support/service.ts), for the run's last line.
const serviceLogDir = mkdtempSync(join(tmpdir(), 'agent-audio-service-cpu-'));
process.env.TEST_SERVICE_CPU_LOG = join(serviceLogDir, 'services.jsonl');
const startedAt = Date.now();
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
// A file's process may exit after the run reported it; a process that never started has no exit to wait for.
let giveUp;
await Promise.race([cpu.settled(), new Promise((resolve) => (giveUp = setTimeout(resolve, 10_000)))]);
clearTimeout(giveUp);
const cpuMs = new Map([...cpu.seconds].map(([file, seconds]) => [file, seconds * 1000]));
const filesCpuMs = [...cpuMs.values()].reduce((sum, ms) => sum + ms, 0);
process.stdout.write(
  runSummary({
    wallMs: Date.now() - startedAt,
    fileWallMs: measured.rows.reduce((sum, row) => sum + row.ms, 0),
    cpuMs: filesCpuMs,
    cores: availableParallelism(),
  }),
);
const serviceLines = readFileSync(process.env.TEST_SERVICE_CPU_LOG, { encoding: 'utf8', flag: 'a+' });
rmSync(serviceLogDir, { recursive: true, force: true });
process.stdout.write(servicesSummary(serviceLines, filesCpuMs));
if (cpu.shared()) process.stdout.write(`(${cpu.shared()} files ended together and share their CPU by wall time)\n`);
if (process.env.TEST_FILE_TIMES === 'record') {
  const passing = measured.rows.filter((row) => !row.failed);
  const passed = new Map(passing.map((row) => [row.file, row.ms]));
  const passedCpu = new Map(passing.filter((row) => cpuMs.has(row.file)).map((row) => [row.file, cpuMs.get(row.file)]));
  const ran = files.map((file) => sourceName(folder, file));
  const keptCpu = mergedTimes({ times: readCpu(), measured: true }, passedCpu, ran);
  writeTimes(mergedTimes(readTimes(), passed, ran), undefined, keptCpu);
}
