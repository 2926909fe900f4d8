import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface MetricsServer {
  /** Where Prometheus scrapes, e.g. http://127.0.0.1:9464/metrics. */
  url: string;
  close(): Promise<void>;
}

/**
 * GET /metrics (and GET /health/details: dependency addresses, latencies, catalog errors) on its own listener
 * (loopback by default), so the public API port never serves operator data.
 */
export async function startMetricsServer(
  registry: Registry,
  host: string,
  port: number,
  healthDetails?: () => Promise<unknown>,
): Promise<MetricsServer> {
  const server = createServer((req, res) => {
    if (healthDetails && req.url === '/health/details' && req.method === 'GET') {
      healthDetails().then(
        (details) => {
          res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(details));
        },
        (err: Error) => {
          res.writeHead(500, { 'content-type': 'text/plain' }).end(`health could not be read: ${err.message}\n`);
        },
      );
      return;
    }
    if (req.url !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res
        .writeHead(404, { 'content-type': 'text/plain' })
        .end("Prometheus metrics are at GET /metrics, the operator's health details at GET /health/details.\n");
      return;
    }
    registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': registry.contentType }).end(req.method === 'HEAD' ? undefined : text);
      },
      (err: Error) => {
        res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics could not be collected: ${err.message}\n`);
      },
    );
  });
  server.keepAliveTimeout = 5_000;
  server.requestTimeout = 10_000;
  server.listen(port, host);
  await once(server, 'listening');
  const address = server.address() as AddressInfo;
  return {
    url: `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
