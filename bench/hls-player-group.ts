/**
 * A group of HLS players of one stream in a child process of bench/hls.ts (forked with IPC): `count` players
 * (bench/hls-player.ts) started over `rampSeconds`, playing until `untilEpochMs`, their segments fetched from
 * `segmentBase` when given (a CDN edge in front of nginx). Answers {type: 'sample'} with its counters so far; once
 * done, sends what each player fetched and exits. A few hundred players a process keep each one's sockets well within
 * its file descriptor limit.
 * argv: <index.m3u8 URL> <count> <rampSeconds> [segmentOrigin segmentBase]
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Player } from './hls-player.js';

export interface GroupSample {
  type: 'sample';
  playlists: number;
  segments: number;
  bytes: number;
}

export interface GroupDone {
  type: 'done';
  players: { fetched: number[]; failures: number; retries: number; refused: number; bytes: number }[];
  lastSegment?: string;
}

const [master, count, rampSeconds, segmentOrigin, segmentBase] = process.argv.slice(2);
let until = Number.POSITIVE_INFINITY;
const via = (url: URL) => (segmentBase && url.origin === segmentOrigin ? new URL(url.pathname, segmentBase) : url);
const players = Array.from({ length: Number(count) }, () => new Player(master, via));
process.on('message', (message: { type: string }) => {
  if (message.type === 'stop') until = Date.now();
  if (message.type !== 'sample') return;
  const sample: GroupSample = {
    type: 'sample',
    playlists: players.reduce((n, p) => n + p.playlists, 0),
    segments: players.reduce((n, p) => n + p.fetched.size, 0),
    bytes: players.reduce((n, p) => n + p.bytes, 0),
  };
  process.send!(sample);
});
process.send!({ type: 'ready' });
await Promise.all(
  players.map(async (p, i) => {
    await sleep((i / players.length) * Number(rampSeconds) * 1000);
    if (Date.now() >= until) return;
    await p
      .run(() => until)
      .catch(() => {
        p.failures++;
      });
  }),
);
const done: GroupDone = {
  type: 'done',
  players: players.map((p) => ({
    fetched: [...p.fetched],
    failures: p.failures,
    retries: p.retries,
    refused: p.refused,
    bytes: p.bytes,
  })),
  lastSegment: players.map((p) => p.lastSegment).find((a) => a),
};
process.send!(done, () => process.exit(0));
