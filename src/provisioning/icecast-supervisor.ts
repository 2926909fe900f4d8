import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { chown, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildIcecastConfig } from './icecast-config.js';
import { IcecastAdmin } from './icecast-admin.js';
import { freePort, isFree, listensOn } from './local-ports.js';
import { RestartBackoff, type RestartDelays } from './restart-backoff.js';
import { systemUserIds } from './system-user.js';

export interface IcecastSupervisorOptions {
  /**
   * Config, pid file and logs go here; created and handed to `runAsUser` when we are root
   * (its parent directories must let that user through).
   */
  dataDir: string;
  callbackBaseUrl: string;
  callbackAuth?: { user: string; password: string };
  host?: string;
  /** Default: a free loopback port, kept across restarts. */
  port?: number;
  /** Without `port`: tried first when it is free (e.g. the port of the previous run), else a free port. */
  preferredPort?: number;
  maxClients?: number;
  maxSources?: number;
  /** Raised as far as the hard limit allows; every listener and source is a file descriptor. */
  openFiles?: number;
  /** Icecast refuses to run as root; this user runs it when we are root. */
  runAsUser?: string;
  binary?: string;
  startTimeoutMs?: number;
  /**
   * SIGKILL follows SIGTERM after this long (250 ms unless set). Icecast takes 1.2 to 1.5 s to stop by itself (its
   * threads wake up about once a second), which every stop and restart of serve would wait for; it has no durable
   * state, and its callbacks go to an API that has closed by then, so the kill loses nothing.
   */
  stopTimeoutMs?: number;
  restartDelayMs?: RestartDelays;
  /** Only these addresses may connect to Icecast (its allow-ip file); any when unset. */
  allowIps?: string[];
  /** The proxy in front decides sources and listeners; its sources come in with this password (icecast-config.ts). */
  proxySourcePassword?: string;
  /**
   * Further addresses Icecast listens on, at its one port (ICECAST_PROXY_ADDRESSES). Icecast starts without a socket
   * it cannot bind, so each is checked to be its own once it answers; else it is stopped and another port tried.
   */
  moreAddresses?: readonly string[];
}

export interface IcecastStartedEvent {
  pid: number;
  port: number;
  startMs: number;
}
export interface IcecastExitedEvent {
  pid: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Stopped as asked by stop(), within the stop timeout: nothing to warn about. */
  expected: boolean;
}

export type IcecastSupervisorEvents = {
  /** The first start after start(). */
  started: [IcecastStartedEvent];
  /** Icecast died or was stopped. */
  exited: [IcecastExitedEvent];
  /** Icecast is back after a crash, on the same port and credentials, with no mounts: sources must reconnect. */
  restarted: [IcecastStartedEvent & { attempt: number }];
  restartFailed: [Error];
};

// Raise the open-files limit ($0), then exec the rest so that Icecast keeps this process id.
const RAISE_LIMIT_AND_EXEC = 'ulimit -n "$0" 2>/dev/null || ulimit -n "$(ulimit -H -n)"; exec "$@"';

/** How long a starting Icecast is left alone before the first admin request (see waitUntilAnswering). */
const FIRST_REQUEST_AFTER_MS = 150;

/** How long a stopping Icecast gets to end by itself before it is killed (see `stopTimeoutMs`). */
const STOP_GRACE_MS = 250;

export class IcecastSupervisor extends EventEmitter<IcecastSupervisorEvents> {
  readonly host: string;
  readonly adminUser = 'admin';
  private currentPort = 0;
  private adminClient?: IcecastAdmin;
  private adminPassword = '';
  private child?: ChildProcess;
  private childExited?: Promise<void>;
  private outputTail = '';
  private launching = false;
  /** True before start() and after stop(): nothing is restarted. */
  private stopped = true;
  private readonly restarts: RestartBackoff;
  private launchedAt = 0;
  private owner?: { uid: number; gid: number };

  constructor(private readonly options: IcecastSupervisorOptions) {
    super();
    this.host = options.host ?? '127.0.0.1';
    this.restarts = new RestartBackoff(options.restartDelayMs);
  }

  get port(): number {
    return this.currentPort;
  }

  /** Admin API client; its credentials stay valid across restarts. */
  get admin(): IcecastAdmin {
    if (!this.adminClient) throw new Error('icecast supervisor not started');
    return this.adminClient;
  }

  get baseUrl(): string {
    return `http://${this.host}:${this.port}`;
  }

  /** Every address Icecast listens on, all at `port`. */
  get addresses(): string[] {
    return [this.host, ...(this.options.moreAddresses ?? [])];
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get configPath(): string {
    return join(this.options.dataDir, 'icecast.xml');
  }

  get accessLogPath(): string {
    return join(this.options.dataDir, 'access.log');
  }

  get errorLogPath(): string {
    return join(this.options.dataDir, 'error.log');
  }

  async start(): Promise<void> {
    if (!this.stopped) throw new Error('icecast supervisor already started');
    this.stopped = false;
    this.restarts.reset();
    try {
      this.owner = await this.runAsIds();
      await mkdir(this.options.dataDir, { recursive: true, mode: 0o750 });
      if (this.owner) await chown(this.options.dataDir, this.owner.uid, this.owner.gid);
      this.adminPassword = randomBytes(18).toString('base64url');
      this.emit('started', await this.launchOnSomePort());
    } catch (error) {
      this.stopped = true;
      throw error;
    }
  }

  // A free port can be taken between our probe and Icecast's bind: then Icecast exits and we pick another.
  private async launchOnSomePort(): Promise<IcecastStartedEvent> {
    for (let attempt = 1; ; attempt++) {
      const preferred = attempt === 1 ? this.options.preferredPort : undefined;
      this.currentPort = this.options.port ?? (await this.freePortPreferring(preferred));
      this.adminClient = new IcecastAdmin({
        baseUrl: this.baseUrl,
        user: this.adminUser,
        password: this.adminPassword,
      });
      await this.writeConfig();
      try {
        return await this.launch();
      } catch (error) {
        if (this.options.port !== undefined || attempt >= 3 || this.stopped) throw error;
      }
    }
  }

  private async freePortPreferring(preferred: number | undefined): Promise<number> {
    const freeEverywhere = async (port: number) =>
      (await Promise.all(this.addresses.map((address) => isFree(address, port)))).every(Boolean);
    if (preferred && (await freeEverywhere(preferred))) return preferred;
    for (;;) {
      const port = await freePort(this.host);
      if (await freeEverywhere(port)) return port;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.restarts.cancel();
    await this.killChild();
  }

  private async runAsIds(): Promise<{ uid: number; gid: number } | undefined> {
    if (process.getuid?.() !== 0) return undefined;
    const user = this.options.runAsUser ?? 'icecast2';
    const ids = systemUserIds(user);
    if (!ids) throw new Error(`the system user ${user} that Icecast runs as does not exist: run npm run setup`);
    return ids;
  }

  private async writeConfig(): Promise<void> {
    const config = buildIcecastConfig({
      host: this.host,
      port: this.port,
      adminUser: this.adminUser,
      adminPassword: this.adminPassword,
      callbackBaseUrl: this.options.callbackBaseUrl,
      callbackAuth: this.options.callbackAuth,
      dir: this.options.dataDir,
      maxClients: this.options.maxClients ?? 1000,
      maxSources: this.options.maxSources ?? 100,
      allowIpFile: this.options.allowIps && join(this.options.dataDir, 'allowed-ips'),
      proxySourcePassword: this.options.proxySourcePassword,
      moreAddresses: this.options.moreAddresses,
    });
    if (this.options.allowIps)
      await writeFile(join(this.options.dataDir, 'allowed-ips'), `${this.options.allowIps.join('\n')}\n`, {
        mode: 0o644,
      });
    await writeFile(this.configPath, config, { mode: 0o600 });
    if (this.owner) await chown(this.configPath, this.owner.uid, this.owner.gid);
  }

  private command(): string[] {
    // setpriv --pdeathsig makes the kernel kill Icecast when we die, however we die. It must come
    // after the user switch (a credential change clears it), which setpriv does in the same step.
    const { owner } = this;
    const switchUser = owner ? [`--reuid=${owner.uid}`, `--regid=${owner.gid}`, '--init-groups'] : [];
    return [
      'sh',
      '-c',
      RAISE_LIMIT_AND_EXEC,
      String(this.options.openFiles ?? 65536),
      'setpriv',
      ...switchUser,
      '--pdeathsig',
      'SIGKILL',
      '--',
      this.options.binary ?? 'icecast2',
      '-c',
      this.configPath,
    ];
  }

  /** Starts Icecast and waits until its admin API answers; on failure the process is gone when this throws. */
  private async launch(): Promise<IcecastStartedEvent> {
    const began = performance.now();
    const [file, ...args] = this.command();
    // detached: a process group of its own, so that Ctrl-C in a terminal (which signals the whole foreground group)
    // does not reach Icecast; serve stops it in its own order. --pdeathsig still ends it if serve dies.
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    this.child = child;
    this.outputTail = '';
    this.launching = true;
    const keepTail = (chunk: Buffer) => {
      this.outputTail = (this.outputTail + chunk.toString()).slice(-4000);
    };
    child.stdout!.on('data', keepTail);
    child.stderr!.on('data', keepTail);
    this.childExited = new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', (error) => {
        keepTail(Buffer.from(String(error)));
        resolve();
      });
    });
    child.once('exit', (code, signal) => this.onExit(child, code, signal));

    try {
      await this.waitUntilAnswering(child);
      await this.checkAddresses(child);
    } catch (error) {
      await this.killChild();
      throw new Error(`${(error as Error).message}\n${await this.diagnostics()}`);
    } finally {
      this.launching = false;
    }
    this.launchedAt = Date.now();
    return { pid: child.pid!, port: this.port, startMs: Math.round(performance.now() - began) };
  }

  private async waitUntilAnswering(child: ChildProcess): Promise<void> {
    const deadline = Date.now() + (this.options.startTimeoutMs ?? 10_000);
    // Icecast 2.4.4 can die (a NULL dereference in libc) when a request comes while it is still starting: asked every
    // 25 ms from its spawn, 22 of 290 starts segfaulted on a busy machine; first asked 150 ms after, none of 140.
    await sleep(FIRST_REQUEST_AFTER_MS);
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`icecast exited while starting (code ${child.exitCode}, signal ${child.signalCode})`);
      }
      try {
        await this.admin.listMounts();
        return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`icecast did not answer on ${this.baseUrl} in time`);
      await sleep(25);
    }
  }

  /** Icecast goes on without a listen socket it could not bind: another program's there would get its listeners. */
  private async checkAddresses(child: ChildProcess): Promise<void> {
    const more = this.options.moreAddresses ?? [];
    const own = await Promise.all(more.map((address) => listensOn(child.pid!, this.port, address)));
    const missing = more.filter((_, i) => !own[i]);
    if (missing.length) throw new Error(`icecast could not listen on ${missing.join(', ')} at port ${this.port}`);
  }

  private async diagnostics(): Promise<string> {
    const errorLog = await readFile(this.errorLogPath, 'utf8').catch(() => '');
    return `icecast output: ${this.outputTail.trim() || '(none)'}\nerror.log tail: ${errorLog.slice(-2000).trim() || '(none)'}`;
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (child !== this.child) return;
    this.child = undefined;
    // Stopping, Icecast ends by our SIGTERM or by the SIGKILL that follows it: either is the stop asked for.
    this.emit('exited', { pid: child.pid ?? 0, code, signal, expected: this.stopped });
    if (this.stopped || this.launching) return; // stop() or launch() handles it
    this.restarts.ranSince(this.launchedAt);
    this.scheduleRestart();
  }

  private scheduleRestart(): void {
    this.restarts.relaunch({
      events: this,
      launch: () => this.launch(),
      stop: () => this.stop(),
      stopped: () => this.stopped,
    });
  }

  private async killChild(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const escalate = setTimeout(() => child.kill('SIGKILL'), this.options.stopTimeoutMs ?? STOP_GRACE_MS);
    await this.childExited;
    clearTimeout(escalate);
  }
}
