import { once } from 'node:events';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { answerClientErrors, answerStarting, API_PREFIX, type ConnectionCap, limitRequestTime } from '../http/index.js';
import type { Config } from './config.js';
import type { Shutdown } from './shutdown.js';

export interface HttpServer {
  port: number;
  /** The API's address on this machine (…/api/v1). */
  baseUrl: string;
  /** The API's address as agents reach it (PUBLIC_BASE_URL/api/v1 behind a proxy, else baseUrl). */
  publicBaseUrl: string;
  /** Hands requests to the application; until then they get 503 `starting`. Its close runs first at shutdown. */
  serve(listener: RequestListener): void;
  /** Runs `step` at shutdown once the server has closed: every answer has been sent or cut. */
  afterClose(step: () => Promise<unknown>): void;
}

/**
 * Listens first, so that every address the application gives out (the public base URL, Icecast's callbacks) is
 * known when the application is built, and nothing holds an address assigned later.
 */
export async function openHttpServer(
  config: Config,
  connections: ConnectionCap,
  shutdown: Shutdown,
): Promise<HttpServer> {
  // Without Host an HTTP/1.1 request would get Node's bare 400; Koa answers it with an error document instead.
  const server = createServer({ requireHostHeader: false, connectionsCheckingInterval: 1000 }, answerStarting);
  const afterClose: Array<() => Promise<unknown>> = [];
  const close = closeOnce(server, afterClose);
  shutdown.push(close); // a start that fails on the way still closes it
  server.listen(config.port, config.host);
  answerClientErrors(server);
  connections.watch(server);
  await once(server, 'listening');
  limitRequestTime(server, config.http.requestTimeoutMs); // uploads have an idle timeout instead
  server.headersTimeout = config.http.headersTimeoutMs;
  server.keepAliveTimeout = 5_000;
  const { port } = server.address() as AddressInfo;
  const baseUrl = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}${API_PREFIX}`;
  return {
    port,
    baseUrl,
    publicBaseUrl: config.publicBaseUrl ? `${config.publicBaseUrl}${API_PREFIX}` : baseUrl,
    serve(listener) {
      server.removeListener('request', answerStarting);
      server.on('request', listener);
      shutdown.push(close);
    },
    afterClose: (step) => afterClose.push(step),
  };
}

function closeOnce(server: Server, afterClose: Array<() => Promise<unknown>>): () => Promise<void> {
  let closed: Promise<void> | undefined;
  return () => {
    closed ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
      setTimeout(() => server.closeAllConnections(), 2000).unref();
    }).then(async () => {
      for (const step of afterClose) await step();
    });
    return closed;
  };
}
