import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { chown, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildHlsFileServerConfig } from './hls-file-server-config.js';
import type { HlsPlaylistSettings } from './hls-playlist-config.js';
import { accepts, freePort } from './local-ports.js';
import { installed, openFilesHardLimit } from './host-system.js';
import { RestartBackoff } from './restart-backoff.js';
import { systemUserIds } from './system-user.js';

export interface HlsFileServerOptions {
  /** nginx.conf, its pid file and temporary paths go here. */
  runDir: string;
  /** The renditions' directory (DATA_DIR/hls). */
  hlsDir: string;
  host: string;
  /** The operator's port (HLS_LISTEN): used or the start fails; otherwise a free port. */
  port?: number;
  /** Where players reach it (HLS_PUBLIC_URL, a CDN say); by default its own address. */
  publicUrl?: string;
  segmentMaxAgeSeconds: number;
  /** Admitted sessions' media playlists served too (hls-playlist-config.ts). */
  playlists?: HlsPlaylistSettings;
  maxConnections?: number;
  binary?: string;
  startTimeoutMs?: number;
}

export type HlsFileServerEvents = {
  exited: [{ pid: number; code: number | null; signal: NodeJS.Signals | null; expected: boolean }];
  restarted: [{ pid: number; port: number; attempt: number }];
  restartFailed: [Error];
};

const RAISE_LIMIT_AND_EXEC = 'ulimit -n "$(ulimit -H -n)" 2>/dev/null; exec "$@"';

/** Whether nginx is installed (npm run setup installs it). */
export function hlsFileServerInstalled(binary = 'nginx'): boolean {
  return installed(binary);
}

/**
 * nginx serving HLS segments as plain files (hls-file-server-config.ts), supervised like Icecast and HAProxy: config
 * generated, one process in the foreground (master_process off, so that setpriv --pdeathsig ends it with serve;
 * a master's workers would outlive a killed serve), restarted with a backoff on the same port, stopped with serve.
 */
export class HlsFileServer extends EventEmitter<HlsFileServerEvents> {
  private currentPort = 0;
  private child?: ChildProcess;
  private childExited?: Promise<void>;
  private output = '';
  private stopped = true;
  private readonly restarts = new RestartBackoff();
  private launchedAt = 0;

  constructor(private readonly options: HlsFileServerOptions) {
    super();
  }

  get port(): number {
    return this.currentPort;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** The base players fetch segments from: `${publicUrl}/hls/{service_id}/seg<N>-<tag>.ts`. */
  get publicUrl(): string {
    const host = this.options.host === '0.0.0.0' ? '127.0.0.1' : this.options.host;
    return this.options.publicUrl ?? `http://${host.includes(':') ? `[${host}]` : host}:${this.currentPort}`;
  }

  async start(): Promise<void> {
    if (!this.stopped) throw new Error('HLS file server already started');
    this.stopped = false;
    try {
      this.currentPort = this.options.port ?? (await freePort(this.options.host));
      await this.writeConfig();
      await this.launch();
    } catch (error) {
      this.stopped = true;
      throw error;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.restarts.cancel();
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const escalate = setTimeout(() => child.kill('SIGKILL'), 2000);
    await this.childExited;
    clearTimeout(escalate);
  }

  private get configPath(): string {
    return join(this.options.runDir, 'nginx.conf');
  }

  private async writeConfig(): Promise<void> {
    const { runDir } = this.options;
    await mkdir(runDir, { recursive: true, mode: 0o750 });
    const hardLimit = openFilesHardLimit();
    const maxConnections = Math.max(64, Math.min(this.options.maxConnections ?? 20_000, (hardLimit - 100) >> 1));
    const config = buildHlsFileServerConfig({
      bind: { host: this.options.host, port: this.currentPort },
      hlsDir: this.options.hlsDir,
      runDir,
      segmentMaxAgeSeconds: this.options.segmentMaxAgeSeconds,
      maxConnections,
      playlists: this.options.playlists,
    });
    await writeFile(this.configPath, config, { mode: 0o600 });
    const owner = systemUserIds('www-data');
    if (owner) for (const path of [runDir, this.configPath]) await chown(path, owner.uid, owner.gid);
  }

  private async launch(): Promise<number> {
    const owner = systemUserIds('www-data');
    const switchUser = owner ? [`--reuid=${owner.uid}`, `--regid=${owner.gid}`, '--init-groups'] : [];
    const args = ['-c', RAISE_LIMIT_AND_EXEC, 'nginx', 'setpriv', ...switchUser, '--pdeathsig', 'SIGKILL', '--'];
    const nginxArgs = ['-p', this.options.runDir, '-c', this.configPath, '-e', 'stderr'];
    nginxArgs.push('-g', 'daemon off; master_process off;');
    const child = spawn('sh', [...args, this.options.binary ?? 'nginx', ...nginxArgs], {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    this.child = child;
    this.output = '';
    const keep = (chunk: Buffer) => {
      this.output = (this.output + chunk.toString()).slice(-4000);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    this.childExited = new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    });
    try {
      await this.waitUntilListening(child);
    } catch (error) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await this.childExited;
      throw new Error(`${(error as Error).message}\nnginx output: ${this.output.trim() || '(none)'}`);
    }
    this.launchedAt = Date.now();
    child.once('exit', (code, signal) => this.onExit(child, code, signal));
    if (child.exitCode !== null || child.signalCode !== null) this.onExit(child, child.exitCode, child.signalCode);
    return child.pid!;
  }

  private async waitUntilListening(child: ChildProcess): Promise<void> {
    const deadline = Date.now() + (this.options.startTimeoutMs ?? 10_000);
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`nginx exited while starting (code ${child.exitCode}, signal ${child.signalCode})`);
      if (await accepts(this.options.host, this.currentPort)) return;
      if (Date.now() > deadline) throw new Error(`nginx did not listen on port ${this.currentPort} in time`);
      await sleep(25);
    }
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (child !== this.child) return;
    this.child = undefined;
    this.emit('exited', { pid: child.pid ?? 0, code, signal, expected: this.stopped });
    if (this.stopped) return;
    this.restarts.ranSince(this.launchedAt);
    this.scheduleRestart();
  }

  private scheduleRestart(): void {
    this.restarts.relaunch({
      events: this,
      launch: async () => ({ pid: await this.launch(), port: this.currentPort }),
      stop: () => this.stop(),
      stopped: () => this.stopped,
    });
  }
}
