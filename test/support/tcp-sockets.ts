import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import { waitFor } from './streaming.js';

/** A TCP socket of this machine as the kernel lists it (/proc/net/tcp, tcp6), with the process that holds it. */
export interface TcpSocket {
  local: number;
  remote: number;
  /** The kernel's state: '01' established, '0A' listening. */
  state: string;
  inode: number;
  owner?: { pid: number; name: string };
}

const portOf = (hexAddress: string) => Number.parseInt(hexAddress.split(':')[1], 16);

/** Which process holds each socket inode, from the descriptors of every process (/proc/<pid>/fd). */
function socketOwners(): Map<number, { pid: number; name: string }> {
  const owners = new Map<number, { pid: number; name: string }>();
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const name = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
        if (inode) owners.set(Number(inode), { pid: Number(pid), name });
      }
    } catch {
      // A process that ended meanwhile, or one whose descriptors are not ours to read.
    }
  }
  return owners;
}

/** Every TCP socket of the machine, each with its owner when a process holds it. */
export function tcpSockets(): TcpSocket[] {
  const owners = socketOwners();
  return ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((file) =>
    readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .slice(1)
      .map((line) => line.trim().split(/\s+/))
      .map(([, local, remote, state, , , , , , inode]) => ({
        local: portOf(local),
        remote: portOf(remote),
        state,
        inode: Number(inode),
        owner: owners.get(Number(inode)),
      })),
  );
}

/** The established socket at the other end of `s` on this machine (the same ports, swapped). */
export const peerOf = (all: TcpSocket[], s: TcpSocket): TcpSocket | undefined =>
  all.find((o) => o.local === s.remote && o.remote === s.local && o.state === '01');

/** The established TCP connections a process holds. */
export const establishedBy = (all: TcpSocket[], pid: number): TcpSocket[] =>
  all.filter((s) => s.owner?.pid === pid && s.state === '01');

/** A listener on a raw socket: what it received, and its HTTP status once the answer's first line came. */
export interface RawListener {
  socket: net.Socket;
  status(): number;
  received(): Buffer;
}

/**
 * Opens `path` on `port` from the loopback address `from` (serve keeps a listener's /24, so listeners meant to be
 * told apart come from different networks) and resolves once the status line came, or the connection closed.
 */
export async function rawListener(port: number, path: string, from: string): Promise<RawListener> {
  const socket = net.connect({ port, host: '127.0.0.1', localAddress: from });
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.on('error', () => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.write(`GET ${path} HTTP/1.0\r\nHost: 127.0.0.1\r\nUser-Agent: socket-owner-test\r\n\r\n`);
  const received = () => Buffer.concat(chunks);
  const status = () => Number(/^HTTP\/1\.\d (\d{3})/.exec(received().toString('latin1', 0, 64))?.[1] ?? 0);
  await waitFor('an answer', async () => (status() || socket.destroyed ? true : undefined), 15_000);
  return { socket, status, received };
}
