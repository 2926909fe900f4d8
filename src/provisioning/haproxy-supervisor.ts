import { spawn, type ChildProcess } from 'node:child_process';
import { createSecretKey, randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { chown, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ForwardedClaim } from './front-door.js';
import { HaproxyCloseEvents } from './haproxy-close-events.js';
import { buildHaproxyConfig, claimProxied } from './haproxy-config.js';
import { buildAdmissionLua } from './haproxy-admission.js';
import { buildHeadLua } from './haproxy-head.js';
import { PROXY_QUEUE_SECONDS, type ListenerEndListener } from './listener-end.js';
import type { SourceEndListener, SourcePresenceListener } from './source-end.js';
import { freePort, isFree, listensOn } from './local-ports.js';
import { openFilesHardLimit } from './host-system.js';
import { RestartBackoff, type RestartDelays } from './restart-backoff.js';
import { systemUserIds } from './system-user.js';

export interface HaproxySupervisorOptions {
  /** haproxy.cfg goes here (0600: it holds the ticket key). */
  dataDir: string;
  host: string;
  /** The operator's address (ICECAST_LISTEN): used or the start fails. */
  port?: number;
  /** Without `port`: tried first when free (the previous run's port), else a free port. */
  preferredPort?: number;
  /** Icecast's loopback address now (it may change when Icecast restarts). */
  upstream: () => { host: string; port: number } | undefined;
  /** Icecast's `<clients>` limit: at most this many connections to it at once. */
  icecastClients: number;
  /** Where HAProxy asks serve to admit a listener or a source (its callback server) and with which credentials. */
  admission: { callbackBaseUrl: string; callbackAuth: { user: string; password: string }; timeoutMs: number };
  /** Icecast's source password (IcecastSupervisorOptions.proxySourcePassword): an admitted source's credentials. */
  icecastSourcePassword: string;
  /** The loopback address HAProxy connects to Icecast from (the one Icecast accepts besides serve's). */
  sourceAddress?: string;
  backlog?: number;
  queueTimeoutSeconds?: number;
  binary?: string;
  startTimeoutMs?: number;
  restartDelayMs?: RestartDelays;
  /** Told the exact bytes of each source connection (HAProxy's end-of-connection line), the meter's final figure. */
  onSourceEnd?: SourceEndListener;
  /** Told the bytes HAProxy sent to each listener when its connection closes (the meter's final figure). */
  onListenerEnd?: ListenerEndListener;
  /** Told when Icecast took a source HAProxy let in, and when its connection closed (mount_add, mount_remove). */
  onSourcePresence?: SourcePresenceListener;
}

export interface HaproxyStartedEvent {
  /** HAProxy's processes (one unless the open-files limit needs more, see processesFor). */
  pids: number[];
  port: number;
  startMs: number;
}

export type HaproxySupervisorEvents = {
  exited: [{ pid: number; code: number | null; signal: NodeJS.Signals | null; expected: boolean }];
  restarted: [HaproxyStartedEvent & { attempt: number }];
  restartFailed: [Error];
};

/** More processes than this would share two cores for little: past it a host holds fewer connections. */
const MAX_PROCESSES = 4;
// Raise the open-files limit to the hard limit, then exec so that HAProxy keeps this process id.
const RAISE_LIMIT_AND_EXEC = 'ulimit -n "$(ulimit -H -n)" 2>/dev/null; exec "$@"';

/**
 * Runs HAProxy in front of Icecast (see haproxy-config.ts) the way IcecastSupervisor runs Icecast: its config
 * generated in DATA_DIR, started in the foreground in a process group of its own, ended by the kernel if serve dies
 * (setpriv --pdeathsig), restarted with a backoff on the same port if it dies, stopped with serve.
 *
 * HAProxy holds two descriptors per connection. When the open-files limit cannot hold every connection Icecast may
 * carry, several HAProxy processes run from one config and listen on the same port (HAProxy binds with
 * SO_REUSEPORT; the kernel spreads new connections among them), each with its share of the connections to Icecast.
 * They are one proxy: when one dies, the others are stopped too and all are started again, so that every listener's
 * place is freed at once (their connections are gone) and none is freed that is still held.
 */
export class HaproxySupervisor extends EventEmitter<HaproxySupervisorEvents> {
  private readonly ticketKey = randomBytes(32).toString('base64');
  /** The same key, imported once: each listener's claim is checked with it. */
  private readonly ticketKeyObject = createSecretKey(Buffer.from(this.ticketKey, 'base64'));
  private readonly closeEvents: HaproxyCloseEvents;
  private currentPort = 0;
  private children: ChildProcess[] = [];
  private childrenExited: Promise<void>[] = [];
  private output = '';
  private stopped = true;
  private launching = false;
  private readonly restarts: RestartBackoff;
  private launchedAt = 0;

  constructor(private readonly options: HaproxySupervisorOptions) {
    super();
    this.closeEvents = new HaproxyCloseEvents(options.onSourceEnd, options.onListenerEnd, options.onSourcePresence);
    this.restarts = new RestartBackoff(options.restartDelayMs);
  }

  get port(): number {
    return this.currentPort;
  }

  get pids(): number[] {
    return this.children.flatMap((child) => (child.pid ? [child.pid] : []));
  }

  get configPath(): string {
    return join(this.options.dataDir, 'haproxy.cfg');
  }

  /** A listener_add's credentials: the address HAProxy signed, 'impostor' for a forged ticket. */
  claim(user: string, pass: string): ForwardedClaim {
    return claimProxied(user, pass, this.ticketKeyObject, (ticket, left) => this.closeEvents.whenClosed(ticket, left));
  }

  async start(): Promise<void> {
    if (!this.stopped) throw new Error('haproxy supervisor already started');
    this.stopped = false;
    try {
      await mkdir(this.options.dataDir, { recursive: true, mode: 0o750 });
      const { host, port, preferredPort } = this.options;
      if (port !== undefined) {
        // Something else on that address would answer the readiness probe in HAProxy's place.
        if (!(await isFree(host, port))) throw new Error(`${host}:${port} is in use`);
        this.currentPort = port;
      } else if (preferredPort && (await isFree(host, preferredPort))) this.currentPort = preferredPort;
      else this.currentPort = await freePort(host);
      await this.closeEvents.start();
      await this.launch();
    } catch (error) {
      this.stopped = true;
      this.closeEvents.stop();
      throw error;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.restarts.cancel();
    this.closeEvents.stop();
    await this.stopChildren();
  }

  /** SIGTERM is HAProxy's hard stop: every connection closes at once, as Icecast's stop would close them. */
  private async stopChildren(): Promise<void> {
    const children = this.children;
    const exited = this.childrenExited;
    this.children = [];
    this.childrenExited = [];
    const running = children.filter((child) => child.exitCode === null && child.signalCode === null);
    for (const child of running) child.kill('SIGTERM');
    const escalate = setTimeout(() => {
      for (const child of running) child.kill('SIGKILL');
    }, 2000);
    await Promise.all(exited);
    clearTimeout(escalate);
  }

  /** Writes the config every process runs from; returns how many processes share the port. */
  private async writeConfig(): Promise<number> {
    const upstream = this.options.upstream();
    if (!upstream) throw new Error('icecast is not running');
    const hardLimit = openFilesHardLimit();
    const { processes, maxConnections, serverMaxConnections } = processesFor(this.options.icecastClients, hardLimit);
    const admissionLuaPath = join(this.options.dataDir, 'admission.lua');
    const config = buildHaproxyConfig({
      bind: { host: this.options.host, port: this.currentPort },
      upstream,
      ticketKey: this.ticketKey,
      maxConnections,
      serverMaxConnections,
      closeEvents: { port: this.closeEvents.port, secret: this.closeEvents.secret },
      headLuaPath: join(this.options.dataDir, 'head.lua'),
      admissionLuaPath,
      sourceAddress: this.options.sourceAddress,
      backlog: this.options.backlog ?? 4096,
      queueTimeoutSeconds: this.options.queueTimeoutSeconds ?? PROXY_QUEUE_SECONDS,
    });
    const luaPath = join(this.options.dataDir, 'head.lua');
    const { admission } = this.options;
    await writeFile(luaPath, buildHeadLua(), { mode: 0o600 });
    const lua = buildAdmissionLua({
      ...admission,
      timeoutMs: admission.timeoutMs,
      sourceAuth: { user: 'source', password: this.options.icecastSourcePassword },
      logSecret: this.closeEvents.secret,
    });
    await writeFile(admissionLuaPath, lua, { mode: 0o600 });
    await writeFile(this.configPath, config, { mode: 0o600 });
    const owner = systemUserIds('haproxy');
    if (owner)
      for (const path of [this.options.dataDir, luaPath, admissionLuaPath, this.configPath])
        await chown(path, owner.uid, owner.gid);
    return processes;
  }

  private async launch(): Promise<HaproxyStartedEvent> {
    const began = performance.now();
    const processes = await this.writeConfig();
    this.output = '';
    this.launching = true;
    try {
      for (let i = 0; i < processes; i++) this.spawnOne();
      await Promise.all(this.children.map((child) => this.waitUntilListening(child)));
    } catch (error) {
      await this.stopChildren();
      throw new Error(`${(error as Error).message}\nhaproxy output: ${this.output.trim() || '(none)'}`);
    } finally {
      this.launching = false;
    }
    this.launchedAt = Date.now();
    return { pids: this.pids, port: this.currentPort, startMs: Math.round(performance.now() - began) };
  }

  private spawnOne(): void {
    const binary = this.options.binary ?? 'haproxy';
    // setpriv switches to the haproxy user itself, before --pdeathsig: a credential change (HAProxy's own `user`
    // directive) would clear it, and a HAProxy left behind by a killed serve would hold the public port.
    const owner = systemUserIds('haproxy');
    const switchUser = owner ? [`--reuid=${owner.uid}`, `--regid=${owner.gid}`, '--init-groups'] : [];
    const args = ['-c', RAISE_LIMIT_AND_EXEC, 'haproxy', 'setpriv', ...switchUser, '--pdeathsig', 'SIGKILL', '--'];
    const child = spawn('sh', [...args, binary, '-db', '-f', this.configPath], {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const keep = (chunk: Buffer) => {
      this.output = (this.output + chunk.toString()).slice(-4000);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    this.children.push(child);
    this.childrenExited.push(
      new Promise((resolve) => {
        child.once('exit', () => resolve());
        child.once('error', (error) => {
          keep(Buffer.from(String(error)));
          resolve();
        });
      }),
    );
    child.once('exit', (code, signal) => this.onExit(child, code, signal));
  }

  private async waitUntilListening(child: ChildProcess): Promise<void> {
    const deadline = Date.now() + (this.options.startTimeoutMs ?? 10_000);
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`haproxy exited while starting (code ${child.exitCode}, signal ${child.signalCode})`);
      if (child.pid && (await listensOn(child.pid, this.currentPort))) return;
      if (Date.now() > deadline) throw new Error(`haproxy did not listen on port ${this.currentPort} in time`);
      await sleep(25);
    }
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (!this.children.includes(child)) return;
    this.emit('exited', { pid: child.pid ?? 0, code, signal, expected: this.stopped });
    if (this.stopped || this.launching) return;
    void this.stopChildren().then(() => {
      this.closeEvents.allClosed();
      this.restarts.ranSince(this.launchedAt);
      this.scheduleRestart();
    });
  }

  private scheduleRestart(): void {
    this.restarts.relaunch({
      events: this,
      launch: () => this.launch(),
      stop: () => this.stop(),
      stopped: () => this.stopped,
    });
  }
}

/**
 * How many HAProxy processes a host runs, and the connections each holds: all Icecast's clients and some room (for
 * refusals on their way out), two descriptors each and some for HAProxy itself, within the open-files hard limit.
 */
export function processesFor(
  icecastClients: number,
  hardLimit: number,
): { processes: number; maxConnections: number; serverMaxConnections: number } {
  const perProcess = Math.max(64, Math.floor((hardLimit - 200) / 2));
  const wanted = icecastClients + 100;
  const processes = Math.min(MAX_PROCESSES, Math.ceil(wanted / perProcess));
  const maxConnections = Math.max(64, Math.min(Math.ceil(wanted / processes), perProcess));
  const serverMaxConnections = Math.max(1, Math.min(Math.floor(icecastClients / processes), maxConnections));
  return { processes, maxConnections, serverMaxConnections };
}
