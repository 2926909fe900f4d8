import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { buy } from './purchase.js';
import type { Service } from './service.js';
import { startFfmpegSource, waitFor } from './streaming.js';
import { establishedBy, rawListener, tcpSockets, type TcpSocket } from './tcp-sockets.js';
import { buyerWallet } from './dev-file.js';

/** A bought stream with an encoder on its broadcast_url, live: where listeners connect, and the encoder's socket. */
export interface OnAir {
  serviceId: string;
  publicPort: number;
  path: string;
  encoder: ChildProcess;
  /** The encoder's end of its connection to the public port. */
  encoderSocket: TcpSocket;
  /** Icecast's own loopback port (behind whatever holds the public port). */
  icecastPort: number;
  /** The buyer's source URL, credentials in it. */
  broadcastUrl: string;
}

/** Buys a 64 kbps stream of `places` listener places and puts an ffmpeg encoder on it, until a listener gets 200. */
export async function stationOnAir(service: Service, places: number, station_name: string): Promise<OnAir> {
  const wallet = await buyerWallet(service);
  const bought = await buy(service, wallet, {
    product_id: 'instant-stream',
    email: 'owner@example.com',
    station_name,
    parameters: { duration_hours: 1, max_listeners: places, bitrate_kbps: 64 },
  });
  assert.equal(bought.status, 200, JSON.stringify(bought.body));
  const svc = bought.body.service as { service_id: string; stream_url: string; broadcast_url: string };
  const url = new URL(svc.stream_url);
  const publicPort = Number(url.port);
  const path = url.pathname + url.search;
  const encoder = startFfmpegSource(svc.broadcast_url);
  await waitFor(
    'the mount to go live',
    async () => {
      const probe = await rawListener(publicPort, path, '127.0.1.1');
      probe.socket.destroy();
      return probe.status() === 200;
    },
    20_000,
  );
  const encoderSocket = await waitFor(
    "the encoder's connection",
    () => establishedBy(tcpSockets(), encoder.pid!).find((s) => s.remote === publicPort),
    5000,
  );
  const icecastXml = await readFile(join(service.dataDir, 'icecast', 'icecast.xml'), 'utf8');
  const icecastPort = Number(/<port>(\d+)<\/port>/.exec(icecastXml)![1]);
  return {
    serviceId: svc.service_id,
    publicPort,
    path,
    encoder,
    encoderSocket,
    icecastPort,
    broadcastUrl: svc.broadcast_url,
  };
}
