import { readdir, readFile, readlink } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Delivery {
  at: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  event: {
    id: string;
    type: string;
    created_at: string;
    service_id: string | null;
    order_id: string | null;
    data: Record<string, unknown>;
  };
  /** The sender's port (to find the process that sent it: socketOwner). */
  remotePort: number;
  /** The path and query it was posted to (endpoints of one receiver differ by query). */
  path: string;
}

/** What the receiver answers a delivery: a status, after an optional wait (until `release` is resolved). */
export type Answer = { status: number; release?: Promise<void> };

/** A webhook receiver on 127.0.0.1 that keeps every delivery and answers as `answer` says (200 by default). */
export async function startReceiver(answer: (delivery: Delivery, index: number) => Answer = () => ({ status: 200 })) {
  const deliveries: Delivery[] = [];
  const waiters = new Set<() => void>();
  let open = 0;
  let mostOpen = 0;
  const server = http.createServer((req, res) => {
    open++;
    mostOpen = Math.max(mostOpen, open);
    res.once('close', () => {
      open--;
    });
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      const delivery: Delivery = {
        at: Date.now(),
        headers: req.headers,
        body,
        event: JSON.parse(body),
        remotePort: req.socket.remotePort ?? 0,
        path: req.url ?? '',
      };
      deliveries.push(delivery);
      for (const wake of [...waiters]) wake();
      const { status, release } = answer(delivery, deliveries.length - 1);
      void (release ?? Promise.resolve()).then(() => {
        res.writeHead(status, { 'content-type': 'text/plain' }).end(status < 300 ? 'ok' : 'not now');
      });
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    deliveries,
    /** The most deliveries it was answering at the same time. */
    mostOpen: () => mostOpen,
    /** Resolves with the first delivery that matches, waiting up to timeoutMs. */
    async next(match: (d: Delivery) => boolean, timeoutMs = 60_000): Promise<Delivery> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = deliveries.find(match);
        if (found) return found;
        if (Date.now() > deadline)
          throw new Error(
            `no matching delivery within ${timeoutMs} ms; got ${deliveries.map((d) => d.event.type).join(', ')}`,
          );
        await new Promise<void>((resolve) => {
          const wake = () => {
            clearTimeout(timer);
            waiters.delete(wake);
            resolve();
          };
          const timer = setTimeout(wake, 500);
          waiters.add(wake);
        });
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Which of these processes owns the local TCP port (IPv4, this machine): read from /proc, Linux only. */
export async function socketOwner(localPort: number, pids: number[]): Promise<number | undefined> {
  const table = await readFile('/proc/net/tcp', 'utf8');
  const hexPort = localPort.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set(
    table
      .split('\n')
      .slice(1)
      .map((line) => line.trim().split(/\s+/))
      .filter((f) => f[1]?.endsWith(`:${hexPort}`))
      .map((f) => f[9]),
  );
  for (const pid of pids) {
    const fds = await readdir(`/proc/${pid}/fd`).catch(() => []);
    for (const fd of fds) {
      const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
      const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
      if (inode && inodes.has(inode)) return pid;
    }
  }
  return undefined;
}
