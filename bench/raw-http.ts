/**
 * A keep-alive HTTP/1.1 client on one raw socket, one request at a time, for the HLS players of the benchmarks:
 * thousands of players in a few processes then cost the machine little beyond the kernel's share, so that the
 * servers are measured rather than a client library (fetch costs several times more per request).
 */
import net from 'node:net';

export interface RawAnswer {
  status: number;
  body: Buffer;
}

const ANSWER_TIMEOUT_MS = 30_000;

export class RawHttp {
  private socket?: net.Socket;
  private buffered: Buffer = Buffer.alloc(0);
  private waiting?: { resolve: (a: RawAnswer) => void; reject: (e: Error) => void; timer: NodeJS.Timeout };

  constructor(
    private readonly host: string,
    private readonly port: number,
  ) {}

  get(path: string): Promise<RawAnswer> {
    if (this.waiting) return Promise.reject(new Error('one request at a time'));
    const socket = this.socket ?? this.connect();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => socket.destroy(new Error(`no answer within ${ANSWER_TIMEOUT_MS} ms`)),
        ANSWER_TIMEOUT_MS,
      );
      this.waiting = { resolve, reject, timer };
      socket.write(`GET ${path} HTTP/1.1\r\nHost: ${this.host}:${this.port}\r\n\r\n`);
    });
  }

  close(): void {
    this.socket?.destroy();
  }

  private connect(): net.Socket {
    const socket = net.connect(this.port, this.host);
    socket.setNoDelay(true);
    this.socket = socket;
    this.buffered = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      this.buffered = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
      this.takeAnswer();
    });
    // A socket already given up (an answer that closed it) fails nothing: its successor may be waiting.
    const fail = (error: Error) => {
      if (this.socket !== socket) return;
      this.socket = undefined;
      this.settle()?.reject(error);
    };
    socket.on('error', fail);
    socket.on('close', () => fail(new Error('connection closed')));
    return socket;
  }

  private settle() {
    const waiting = this.waiting;
    this.waiting = undefined;
    if (waiting) clearTimeout(waiting.timer);
    return waiting;
  }

  /** A whole answer in the buffer: its status and body (nginx and serve give a Content-Length to every answer). */
  private takeAnswer(): void {
    const end = this.buffered.indexOf('\r\n\r\n');
    if (end < 0) return;
    const head = this.buffered.toString('latin1', 0, end);
    const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1]);
    if (!Number.isFinite(length)) return void this.socket?.destroy(new Error(`an answer without a length: ${head}`));
    if (this.buffered.length < end + 4 + length) return;
    const answer = { status: Number(head.slice(9, 12)), body: this.buffered.subarray(end + 4, end + 4 + length) };
    this.buffered = this.buffered.subarray(end + 4 + length);
    const waiting = this.settle();
    if (/\r\nconnection:\s*close/i.test(head)) {
      this.socket?.destroy();
      this.socket = undefined;
    }
    waiting?.resolve(answer);
  }
}
