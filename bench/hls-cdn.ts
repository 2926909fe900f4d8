import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A CDN edge for the HLS benchmark, on loopback: what a response allows to be cached (Cache-Control public/max-age)
 * is fetched from the origin once and served from memory after; the rest (playlists, errors) is passed through.
 */
export class CdnEdge {
  private readonly cache = new Map<string, Promise<{ status: number; type: string; body: Buffer } | undefined>>();
  private readonly inflight = new Map<string, ReturnType<CdnEdge['fetchOrigin']>>();
  private server?: http.Server;
  originFetches = 0;
  hits = 0;

  constructor(private readonly origin: string) {}

  async start(): Promise<string> {
    this.server = http.createServer((req, res) => {
      this.answer(req.url ?? '/', res).catch(() => {
        res.statusCode = 502;
        res.end();
      });
    });
    this.server.listen(0, '127.0.0.1');
    await new Promise((resolve) => this.server!.once('listening', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }

  private async answer(path: string, res: http.ServerResponse): Promise<void> {
    const cached = await this.cache.get(path);
    if (cached) {
      this.hits++;
      res.writeHead(cached.status, { 'content-type': cached.type }).end(cached.body);
      return;
    }
    // Concurrent misses of a segment wait for its one fetch (request collapsing, as CDNs do); playlists each go on.
    let fetched = path.endsWith('.ts') ? this.inflight.get(path) : undefined;
    if (!fetched) {
      fetched = this.fetchOrigin(path);
      if (path.endsWith('.ts')) {
        this.inflight.set(path, fetched);
        void fetched.finally(() => this.inflight.delete(path)).catch(() => {});
      }
    }
    const answer = await fetched;
    if (answer.cacheable) this.cache.set(path, fetched);
    res.writeHead(answer.status, { 'content-type': answer.type }).end(answer.body);
  }

  private async fetchOrigin(path: string) {
    this.originFetches++;
    const response = await fetch(this.origin + path);
    const body = Buffer.from(await response.arrayBuffer());
    const cacheable = response.ok && /\bpublic\b.*max-age=[1-9]/.test(response.headers.get('cache-control') ?? '');
    return { status: response.status, type: response.headers.get('content-type') ?? '', body, cacheable };
  }
}
