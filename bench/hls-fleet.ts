import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { GroupDone, GroupSample } from './hls-player-group.js';

/** Players per child process: their sockets (to serve and to nginx) stay far below a process's descriptor limit. */
export const PLAYERS_PER_PROCESS = 500;

export interface FleetOptions {
  root: string;
  hlsUrl: string;
  players: number;
  rampSeconds: number;
  /** Segments from this origin are fetched from `base` instead (a CDN edge in front of nginx). */
  segmentsVia?: { origin: string; base: string };
}

export type FleetPlayer = GroupDone['players'][number];

/** HLS players of one stream in child processes (bench/hls-player-group.ts), sampled while they play, until done. */
export class PlayerFleet {
  private readonly children: ChildProcess[] = [];
  private readonly finished: Promise<GroupDone>[] = [];

  constructor(private readonly options: FleetOptions) {}

  /** Forks the groups; resolves once each is ready to start its players. */
  async start(): Promise<void> {
    const { root, hlsUrl, players, rampSeconds, segmentsVia } = this.options;
    const groups = Math.ceil(players / PLAYERS_PER_PROCESS);
    const ready: Promise<void>[] = [];
    for (let g = 0; g < groups; g++) {
      const count = Math.min(PLAYERS_PER_PROCESS, players - g * PLAYERS_PER_PROCESS);
      const via = segmentsVia ? [segmentsVia.origin, segmentsVia.base] : [];
      const args = [hlsUrl, String(count), String(rampSeconds), ...via];
      const child = fork(join(root, 'bench/hls-player-group.ts'), args, {
        execArgv: ['--import', 'tsx'],
        env: { ...process.env, NODE_OPTIONS: '' },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      this.children.push(child);
      ready.push(messageOf<{ type: string }>(child, 'ready').then(() => {}));
      const finished = messageOf<GroupDone>(child, 'done');
      // Awaited by done(); a group stopped after a failure elsewhere must not hide that failure.
      finished.catch(() => {});
      this.finished.push(finished);
    }
    await Promise.all(ready);
  }

  /** The playlists answered, segments fetched and bytes received so far, over every group. */
  async sample(): Promise<Omit<GroupSample, 'type'>> {
    const samples = await Promise.all(
      this.children.map((child) => {
        const answer = messageOf<GroupSample>(child, 'sample');
        child.send({ type: 'sample' });
        return answer;
      }),
    );
    return {
      playlists: samples.reduce((n, s) => n + s.playlists, 0),
      segments: samples.reduce((n, s) => n + s.segments, 0),
      bytes: samples.reduce((n, s) => n + s.bytes, 0),
    };
  }

  /** Stops the players (each after its current reload) and gives every player's outcome. */
  async done(): Promise<{ players: FleetPlayer[]; lastSegment?: string }> {
    for (const child of this.children) child.send({ type: 'stop' });
    const groups = await Promise.all(this.finished);
    return {
      players: groups.flatMap((g) => g.players),
      lastSegment: groups.map((g) => g.lastSegment).find((s) => s),
    };
  }

  stop(): void {
    for (const child of this.children) if (child.exitCode === null) child.kill('SIGKILL');
  }
}

/** The child's next message of this type (rejected if it exits first). */
function messageOf<T extends { type: string }>(child: ChildProcess, type: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: T) => {
      if (message.type !== type) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolve(message);
    };
    const onExit = (code: number | null) => reject(new Error(`an HLS player group exited with ${code}`));
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}
