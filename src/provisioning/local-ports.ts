import { readdir, readFile, readlink } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';

/** Whether the port can be bound there now (the probe is closed at once). */
export async function isFree(host: string, port: number): Promise<boolean> {
  const server = net.createServer();
  const bound = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, host, () => resolve(true));
  });
  if (bound) await new Promise((resolve) => server.close(resolve));
  return bound;
}

/** A port the system hands out as free there now. */
export async function freePort(host: string): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Whether something accepts TCP connections there now (the probe is closed at once). */
export function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

const LISTEN = '0A';

/** The address and port as /proc/net/tcp writes them: an IPv4 address's bytes in the host's (little-endian) order. */
function procEndpoint(host: string, port: number): string {
  const address = host
    .split('.')
    .reverse()
    .map((byte) => Number(byte).toString(16).toUpperCase().padStart(2, '0'))
    .join('');
  return `${address}:${port.toString(16).toUpperCase().padStart(4, '0')}`;
}

/**
 * Inodes of the sockets listening on this TCP port, as the kernel lists them (/proc/net/tcp and tcp6); with `host`
 * (IPv4), only those bound to that address.
 */
async function listeningInodes(port: number, host?: string): Promise<Set<string>> {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const endpoint = host && procEndpoint(host, port);
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await readFile(table, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      const local = fields[1] ?? '';
      if (fields[3] === LISTEN && (endpoint ? local === endpoint : local.endsWith(`:${hexPort}`)))
        inodes.add(fields[9]);
    }
  }
  return inodes;
}

/**
 * Whether this process itself listens on the port (with `host`: on that IPv4 address). Several processes may listen
 * on one port (SO_REUSEPORT), so a connection that succeeds says nothing about a given one of them.
 */
export async function listensOn(pid: number, port: number, host?: string): Promise<boolean> {
  const inodes = await listeningInodes(port, host);
  if (inodes.size === 0) return false;
  const fds = await readdir(`/proc/${pid}/fd`).catch(() => []);
  for (const fd of fds) {
    const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
    if (inodes.has(target.slice('socket:['.length, -1)) && target.startsWith('socket:[')) return true;
  }
  return false;
}
