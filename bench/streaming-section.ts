/** bench/run.ts's call into the streaming benchmark: runs it, prints its tables, writes its docs/benchmarks.md section. */
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import type { Service } from '../test/support/service.js';
import { machineLine, type Machine } from './report.js';
import { runStreamingBench } from './streaming.js';
import { streamingTables, writeStreamingDocsSection } from './streaming-report.js';

export async function runStreamingSection(o: {
  root: string;
  service: Service;
  scratch: string;
  signal: AbortSignal;
  log: (line: string) => void;
  machine: Machine;
  writeDocs: boolean;
  mounts: string;
  restart?: () => Promise<Service>;
}): Promise<void> {
  if (spawnSync('sh', ['-c', 'command -v icecast2 && command -v ffmpeg']).status !== 0) {
    o.log('streaming benchmark skipped: icecast2 or ffmpeg is not installed');
    return;
  }
  const started = Date.now();
  const settings = {
    points: o.mounts
      .split(',')
      .map(Number)
      .filter((k) => k > 0),
    listenersPerMount: 5,
    holdSeconds: 10,
    // Several mounts cycling sources at once made Icecast 2.4.4 stall for minutes afterwards: one at a time here.
    // Icecast listens with a backlog of 5: a burst much larger than the cap spends minutes in SYN retries.
    listenerBurst: 60,
    listenerCap: 50,
    sourceSeconds: 4,
    sourceParallel: 1,
  };
  const r = await runStreamingBench({
    root: o.root,
    service: o.service,
    signal: o.signal,
    log: o.log,
    scratch: o.scratch,
    restart: o.restart,
    ...settings,
  });
  const text = streamingTables(r);
  const machine = machineLine({ ...o.machine, loadAverageAfter: loadavg() });
  console.log(`\nStreaming, ${machine}\n\n${text}\n`);
  o.log(`streaming benchmark took ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (!o.writeDocs) return;
  await writeStreamingDocsSection(
    join(o.root, 'docs/benchmarks.md'),
    [
      '## Streaming: Icecast auth callbacks, concurrent mounts',
      '',
      `${machine}.`,
      '',
      text,
      '',
      'Method (bench/streaming.ts, run by `npm run bench` after the order benchmarks, on the same service process and its Icecast child):',
      `- Source admissions: a raw source client over TCP (bench/icecast-source.ts: \`PUT /mount HTTP/1.1\`, Basic source credentials, \`Content-Type: audio/mpeg\`, \`Expect: 100-continue\`; Icecast answers \`100 Continue\` when admitted, 401/403 when refused) connects and at once disconnects, in a loop for ${settings.sourceSeconds} s, on ${settings.sourceParallel} mount(s) in parallel. Each admission is 3 callbacks (stream_auth, mount_add, mount_remove). A lone request waits for Icecast\'s auth thread, which polls its queue every 150 ms when idle; with requests queued it works them back to back.`,
      `- Listener admissions: a mount bought with max_listeners ${settings.listenerCap} and a live source; ${settings.listenerBurst} listener GETs opened at once (one socket each); every answer (200 admitted, 401 refused by listener_add, others) counts; seconds = until the last answer.`,
      `- Concurrent mounts: K instant-streams (64 kbps, max_listeners ${settings.listenersPerMount}) bought with x402 before the run; one child process (bench/streaming-sources.ts) holds K raw sources replaying a 64 kbps CBR MP3 at real-time pace (connected 4 at a time); ${settings.listenersPerMount} listeners per mount in this process (opened 8 at a time: Icecast listens with a backlog of 5, and a larger burst measures TCP SYN retries rather than admissions); after 2 s (past the burst-on-connect) a hold during which each listener\'s bytes are sampled every second (a stall = nothing in 2 s). CPU from /proc/<pid>/stat (utime + stime) at the start and end of the hold, memory = PSS from /proc/<pid>/smaps_rollup at the end; processes are grouped by name under the service's tree (icecast2, postgres, the rest = anvil).`,
      ...(r.restart
        ? [
            `- Restart: the first ${r.restart.mounts} of those mounts get sources again (the same child process); each listen URL is probed until it answers 200 (at most 20 s each); serve gets SIGINT and is started again on the same DATA_DIR and environment (test/support/service.ts); GET /services/{id} is compared with the URLs of the purchase; a new sources child connects to the old broadcast URLs and each old listen URL is probed again.`,
          ]
        : []),
    ].join('\n'),
  );
  o.log('wrote the streaming section of docs/benchmarks.md');
}
