/**
 * Child process of the listener-capacity benchmark: `count` HLS players (bench/hls-player.ts) of one stream, started
 * over `rampSeconds`, playing until `untilEpochMs`; then prints one JSON line of what they did and exits.
 * argv: <index.m3u8 URL> <count> <rampSeconds> <untilEpochMs>
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Player } from './hls-player.js';

export interface PlayersReport {
  players: number;
  /** Players that got at least one segment. */
  playing: number;
  segments: number;
  bytes: number;
  failures: number;
  retries: number;
}

const [master, count, rampSeconds, until] = process.argv.slice(2);
const players = Array.from({ length: Number(count) }, () => new Player(master));
await Promise.all(
  players.map(async (p, i) => {
    await sleep((i / players.length) * Number(rampSeconds) * 1000);
    await p.run(Number(until)).catch(() => {
      p.failures++;
    });
  }),
);
const report: PlayersReport = {
  players: players.length,
  playing: players.filter((p) => p.fetched.size > 0).length,
  segments: players.reduce((n, p) => n + p.fetched.size, 0),
  bytes: players.reduce((n, p) => n + p.bytes, 0),
  failures: players.reduce((n, p) => n + p.failures, 0),
  retries: players.reduce((n, p) => n + p.retries, 0),
};
process.stdout.write(`${JSON.stringify(report)}\n`);
