/**
 * Child process of the listener-capacity benchmark: raw listener sockets (one GET each, no HTTP library), so that
 * thousands of listeners are held by several processes of their own rather than by the benchmark's one event loop.
 * Driven over IPC (bench/listener-fleet.ts):
 *  - { type: 'open', urls } opens one listener per URL at once and answers { type: 'opened', answers } once each has
 *    its status line (or an error, or no answer within 90 s): `at` is the epoch time in ms of that answer;
 *  - { type: 'bytes' } answers { type: 'bytes', bytes }: body bytes received so far by every socket opened, in order;
 *  - { type: 'close' } closes every socket and answers { type: 'closed' }.
 */
import { createConnection, type Socket } from 'node:net';

export interface ListenerAnswer {
  status: number;
  error?: string;
  at: number;
}

export type FleetRequest = { type: 'open'; urls: string[] } | { type: 'bytes' } | { type: 'close' };
export type FleetReply =
  | { type: 'ready' }
  | { type: 'opened'; answers: ListenerAnswer[] }
  | { type: 'bytes'; bytes: number[] }
  | { type: 'closed' };

const ANSWER_TIMEOUT_MS = 90_000;
const HEAD_END = Buffer.from('\r\n\r\n');
const now = () => performance.timeOrigin + performance.now();

interface Held {
  socket: Socket;
  bytes: number;
}

const held: Held[] = [];

function open(url: string): Promise<ListenerAnswer> {
  const u = new URL(url);
  const entry: Held = { socket: createConnection({ host: u.hostname, port: Number(u.port || 80) }), bytes: 0 };
  held.push(entry);
  const { socket } = entry;
  return new Promise((resolve) => {
    let head: Buffer | undefined = Buffer.alloc(0);
    const done = (answer: ListenerAnswer) => {
      clearTimeout(timer);
      resolve(answer);
    };
    const timer = setTimeout(() => {
      socket.destroy();
      done({ status: 0, error: 'no answer', at: now() });
    }, ANSWER_TIMEOUT_MS);
    socket.once('connect', () =>
      socket.write(`GET ${u.pathname}${u.search} HTTP/1.0\r\nHost: ${u.host}\r\nUser-Agent: bench-listener\r\n\r\n`),
    );
    socket.on('data', (chunk: Buffer) => {
      if (!head) {
        entry.bytes += chunk.length;
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf(HEAD_END);
      if (end < 0) return;
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head.subarray(0, 64).toString('latin1'))?.[1] ?? 0);
      entry.bytes += head.length - end - HEAD_END.length;
      head = undefined;
      done({ status, at: now() });
    });
    socket.once('error', (e: NodeJS.ErrnoException) => done({ status: 0, error: e.code ?? e.message, at: now() }));
    socket.once('close', () => {
      if (head) done({ status: 0, error: 'closed', at: now() });
    });
  });
}

function reply(message: FleetReply): void {
  process.send!(message);
}

process.on('message', async (message: FleetRequest) => {
  if (message.type === 'open') reply({ type: 'opened', answers: await Promise.all(message.urls.map(open)) });
  else if (message.type === 'bytes') reply({ type: 'bytes', bytes: held.map((h) => h.bytes) });
  else {
    for (const h of held) h.socket.destroy();
    held.length = 0;
    reply({ type: 'closed' });
  }
});
process.once('disconnect', () => process.exit(0));
reply({ type: 'ready' });
