import net from 'node:net';

/**
 * A TCP forwarder on loopback that can be cut as a network partition cuts: nothing is refused or closed, bytes just
 * stop arriving (both ways, on open connections and on new ones), so the client's queries hang rather than fail.
 * `heal()` resets the connections that went silent (as a partition's end often does) and forwards new ones again;
 * `heal({ keepSilent: true })` leaves them silent instead (their next TCP retransmission is minutes away, or the
 * state of a firewall on the way was lost): only new connections get through.
 */
export interface TcpPartition {
  port: number;
  cut(): void;
  heal(options?: { keepSilent?: boolean }): void;
  close(): Promise<void>;
}

export async function startTcpPartition(target: { host: string; port: number }): Promise<TcpPartition> {
  let open = true;
  const sockets = new Set<net.Socket>();
  const pairs: Array<[net.Socket, net.Socket]> = [];
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => undefined);
    if (!open) {
      client.pause();
      return;
    }
    const upstream = net.connect(target.port, target.host);
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
    pairs.push([client, upstream]);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut() {
      open = false;
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    heal({ keepSilent = false } = {}) {
      if (!keepSilent) for (const socket of sockets) socket.destroy();
      pairs.length = 0;
      open = true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
