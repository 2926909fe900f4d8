// Preloaded into serve by `npm run bench:hls -- --cpu-prof DIR` (NODE_OPTIONS=--import): node refuses --cpu-prof in
// NODE_OPTIONS, and the bench profiles its measured window only. The first SIGUSR2 starts V8's profiler, the second
// writes DIR/serve-<pid>.cpuprofile (open it in Chrome's DevTools).
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';

const dir = process.env.HLS_BENCH_CPU_PROF_DIR;
if (dir && process.argv.includes('serve')) {
  const session = new Session();
  session.connect();
  let running = false;
  process.on('SIGUSR2', () => {
    if (!running) {
      running = true;
      session.post('Profiler.enable', () => session.post('Profiler.start'));
      return;
    }
    running = false;
    session.post('Profiler.stop', (err, result) => {
      if (!err) writeFileSync(join(dir, `serve-${process.pid}.cpuprofile`), JSON.stringify(result.profile));
    });
  });
}
