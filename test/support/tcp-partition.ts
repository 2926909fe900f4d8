import net from 'node:net';

/**
 * A TCP forwarder on loopback that can be cut as a network partition cuts: nothing is refused or closed, bytes just
 * stop arriving (both ways, on open connections and on new ones), so the client's queries hang rather than fail.
 * `cut(only)` cuts only the PostgreSQL connections whose startup parameters (application_name, user, …) `only`
 * picks, as a partition of one pool would; it returns how many open connections it cut.
 * `heal()` resets the connections that went silent (as a partition's end often does) and forwards new ones again;
 * `heal({ keepSilent: true })` leaves them silent instead (their next TCP retransmission is minutes away, or the
 * state of a firewall on the way was lost): only new connections get through.
 */
export interface TcpPartition {
  port: number;
  cut(only?: (startup: StartupParameters) => boolean): number;
  /** The connections open now whose startup parameters `only` picks. */
  connections(only: (startup: StartupParameters) => boolean): number;
  heal(options?: { keepSilent?: boolean }): void;
  close(): Promise<void>;
}

export type StartupParameters = Record<string, string>;

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  startup: StartupParameters;
}

export async function startTcpPartition(target: { host: string; port: number }): Promise<TcpPartition> {
  let silenced: ((startup: StartupParameters) => boolean) | undefined;
  const sockets = new Set<net.Socket>();
  const pairs: Pair[] = [];
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  };
  const server = net.createServer((client) => {
    track(client);
    client.on('error', () => undefined);
    // The client speaks first (PostgreSQL's startup message): what it says tells which connection this is.
    client.once('data', (first) => {
      client.pause();
      const startup = startupParameters(first);
      if (silenced?.(startup)) return;
      const upstream = net.connect(target.port, target.host);
      track(upstream);
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      upstream.write(first);
      client.pipe(upstream);
      upstream.pipe(client);
      pairs.push({ client, upstream, startup });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut(only = () => true) {
      silenced = only;
      const cut = pairs.filter((pair) => only(pair.startup) && !pair.client.destroyed);
      for (const { client, upstream } of cut) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
      return cut.length;
    },
    connections: (only) => pairs.filter((pair) => only(pair.startup) && !pair.client.destroyed).length,
    heal({ keepSilent = false } = {}) {
      if (!keepSilent) for (const socket of sockets) socket.destroy();
      pairs.length = 0;
      silenced = undefined;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** The parameters of a PostgreSQL startup message (protocol 3.0): length, version, then name and value pairs. */
function startupParameters(message: Buffer): StartupParameters {
  if (message.length < 8 || message.readInt32BE(4) !== 196608) return {};
  const fields = message
    .subarray(8, Math.min(message.length, message.readInt32BE(0)))
    .toString('utf8')
    .split('\0');
  const parameters: StartupParameters = {};
  for (let i = 0; i + 1 < fields.length && fields[i]; i += 2) parameters[fields[i]] = fields[i + 1];
  return parameters;
}
