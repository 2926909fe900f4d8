import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';

export interface AnvilOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  chainId: number;
  /** A state file in anvil's dump format to start from (see genesis.ts). */
  loadStateFile?: string;
  /** Further command-line options for anvil. */
  extraArgs?: string[];
  onUnexpectedExit?: (code: number | null) => void;
}

export interface AnvilProcess {
  rpcUrl: string;
  port: number;
  /** pid of the anvil binary itself (not of its watchdog shell). */
  pid: number;
  stop(): Promise<void>;
}

export function anvilBinary(): string {
  const require = createRequire(import.meta.url);
  const arch = process.arch === 'x64' ? 'amd64' : process.arch;
  try {
    const pkg = require.resolve(`@foundry-rs/anvil-${process.platform}-${arch}/package.json`);
    const binary = join(dirname(pkg), 'bin', 'anvil');
    if (existsSync(binary)) return binary;
  } catch {
    // fall through to an anvil on PATH
  }
  return 'anvil';
}

// Node cannot ask the kernel to kill a child when the parent dies (no PR_SET_PDEATHSIG), so anvil runs
// under a watchdog shell whose reader blocks on our stdin pipe: when this process exits, even by SIGKILL,
// the pipe closes, `read` hits EOF and anvil is terminated. The shell exits when anvil does.
const WATCHDOG = `exec 3<&0
"$0" "$@" </dev/null 3<&- &
pid=$!
echo "watchdog: anvil pid $pid"
{ while read -r _; do :; done; kill -TERM "$pid" 2>/dev/null; } <&3 &
reader=$!
exec 3<&-
wait "$pid"
status=$?
kill "$reader" 2>/dev/null
exit $status`;

const liveGroups = new Set<number>();
let exitHookInstalled = false;

function killLiveGroupsOnExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const pgid of liveGroups) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
}

async function rpcReady(rpcUrl: string): Promise<boolean> {
  try {
    const response = await fetch(rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
      signal: AbortSignal.timeout(1000),
    });
    return response.ok;
  } catch {
    return false;
  }
}

function waitForExit(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

/** Starts anvil (port 0 = a free port chosen by anvil) and resolves once it answers eth_chainId. */
export async function startAnvil(options: AnvilOptions, timeoutMs = 15_000): Promise<AnvilProcess> {
  const args = ['--host', options.host, '--port', String(options.port), '--chain-id', String(options.chainId)];
  if (options.loadStateFile) args.push('--load-state', options.loadStateFile);
  if (options.extraArgs) args.push(...options.extraArgs);
  // detached: its own process group, so stop() can kill watchdog and anvil together by group id.
  const child = spawn('sh', ['-c', WATCHDOG, anvilBinary(), ...args], {
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const pgid = child.pid!;
  child.stdin!.on('error', () => undefined); // EPIPE when the watchdog is already gone
  liveGroups.add(pgid);
  killLiveGroupsOnExit();
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
  const exited = waitForExit(child).finally(() => liveGroups.delete(pgid));

  // anvil's --quiet would also hide the "Listening on" line that tells us the port, so its
  // banner and request log are read and dropped.
  let pid = 0;
  const listening = new Promise<number>((resolve) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const pidMatch = /^watchdog: anvil pid (\d+)$/.exec(line);
      if (pidMatch) pid = Number(pidMatch[1]);
      const portMatch = /^Listening on .*:(\d+)$/.exec(line.trim());
      if (portMatch) resolve(Number(portMatch[1]));
    });
  });

  let stopping = false;
  const stop = async (): Promise<void> => {
    stopping = true;
    child.stdin!.end();
    const timer = setTimeout(() => {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // already gone
      }
    }, 3000);
    await exited;
    clearTimeout(timer);
  };

  const failed = async (reason: string): Promise<never> => {
    await stop();
    throw new Error(`anvil did not start: ${stderr.trim() || reason}`);
  };
  const deadline = Date.now() + timeoutMs;
  const timeout = new Promise<'timeout'>((resolve) => setTimeout(resolve, timeoutMs, 'timeout').unref());
  const port = await Promise.race([listening, exited.then(() => 'exited' as const), timeout]);
  if (typeof port !== 'number') return failed(port);
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  const rpcUrl = `http://${host}:${port}`;
  while (!(await rpcReady(rpcUrl))) {
    if (child.exitCode !== null || child.signalCode !== null) return failed('exited');
    if (Date.now() > deadline) return failed('timeout');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  void exited.then((code) => {
    if (!stopping) options.onUnexpectedExit?.(code);
  });
  return { rpcUrl, port, pid, stop };
}
