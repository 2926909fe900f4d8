/**
 * Listeners held by child processes of their own (bench/listener-clients.ts), several sockets in each: the
 * listener-capacity benchmark opens thousands at once through it and reads what each received.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { FleetReply, FleetRequest, ListenerAnswer } from './listener-clients.js';
import { stopProcess } from './streaming.js';

/** Sockets per child: few enough that one process reads them all in time, and well under its open-files limit. */
const PER_CHILD = 2500;
/** A listener's slot is its child's number × this + its index in that child. */
const STRIDE = 1_000_000;

export interface Opened {
  /** Epoch ms when the open was sent to the children. */
  sentAt: number;
  answers: ListenerAnswer[];
  /** Per answer: its index in the fleet's byte counts. */
  slots: number[];
}

class Client {
  held = 0;
  private waiting: Array<(r: FleetReply) => void> = [];
  constructor(readonly child: ChildProcess) {
    child.on('message', (m: FleetReply) => this.waiting.shift()?.(m));
  }
  ask(request: FleetRequest): Promise<FleetReply> {
    return new Promise((resolve, reject) => {
      this.waiting.push(resolve);
      this.child.send(request, (e) => e && reject(e));
    });
  }
}

export class ListenerFleet {
  private constructor(private readonly clients: Client[]) {}

  static async start(root: string, listeners: number): Promise<ListenerFleet> {
    const count = Math.max(2, Math.ceil(listeners / PER_CHILD));
    const clients = await Promise.all(
      Array.from({ length: count }, async () => {
        const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'bench/listener-clients.ts')], {
          cwd: root,
          stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        });
        const ready = new Promise<void>((resolve, reject) => {
          child.once('message', () => resolve());
          child.once('exit', (code) => reject(new Error(`a listener-clients child exited with ${code}`)));
        });
        await ready;
        return new Client(child);
      }),
    );
    return new ListenerFleet(clients);
  }

  /** Opens one listener per URL, all at once, spread over the children; resolves when every one has its answer. */
  async open(urls: string[]): Promise<Opened> {
    const parts = this.clients.map(() => [] as number[]);
    urls.forEach((_, i) => parts[i % parts.length].push(i));
    const sentAt = performance.timeOrigin + performance.now();
    const replies = await Promise.all(
      this.clients.map((c, k) => c.ask({ type: 'open', urls: parts[k].map((i) => urls[i]) })),
    );
    const answers: ListenerAnswer[] = new Array(urls.length);
    const slots: number[] = new Array(urls.length);
    replies.forEach((r, k) => {
      if (r.type !== 'opened') throw new Error(`a listener-clients child answered ${r.type}`);
      parts[k].forEach((i, j) => {
        answers[i] = r.answers[j];
        slots[i] = k * STRIDE + this.clients[k].held + j;
      });
      this.clients[k].held += parts[k].length;
    });
    return { sentAt, answers, slots };
  }

  /** Body bytes received so far, indexed by the slots `open` gave. */
  async bytes(): Promise<Map<number, number>> {
    const out = new Map<number, number>();
    const replies = await Promise.all(this.clients.map((c) => c.ask({ type: 'bytes' })));
    replies.forEach((r, k) => {
      if (r.type !== 'bytes') throw new Error(`a listener-clients child answered ${r.type}`);
      r.bytes.forEach((b, j) => out.set(k * STRIDE + j, b));
    });
    return out;
  }

  async closeAll(): Promise<void> {
    await Promise.all(this.clients.map((c) => c.ask({ type: 'close' })));
    for (const c of this.clients) c.held = 0;
  }

  async stop(): Promise<void> {
    await Promise.all(this.clients.map((c) => stopProcess(c.child)));
  }
}
