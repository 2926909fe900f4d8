import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Who this instance's Icecast is across restarts, and the port it last listened on. */
export interface StreamingHostIdentity {
  id: string;
  /** The Icecast port of the previous run, tried first so that the services' addresses stay the same. */
  lastPort?: number;
}

const FILE = 'streaming-host.json';
const HOST_ID = /^[A-Za-z0-9._:-]{1,100}$/;

/** STREAMING_HOST_ID when set (production: one per Icecast), else an id created once and kept in DATA_DIR. */
export function loadStreamingHost(dataDir: string, configured: string | undefined): StreamingHostIdentity {
  let saved: { id?: unknown; port?: unknown } = {};
  try {
    saved = JSON.parse(readFileSync(join(dataDir, FILE), 'utf8'));
  } catch {
    /* first start */
  }
  const lastPort =
    Number.isInteger(saved.port) && (saved.port as number) > 0 && (saved.port as number) < 65536
      ? (saved.port as number)
      : undefined;
  if (configured) return { id: configured, lastPort };
  if (typeof saved.id === 'string' && HOST_ID.test(saved.id)) return { id: saved.id, lastPort };
  const identity = { id: `host_${randomBytes(12).toString('base64url').replace(/[-_]/g, 'x')}` };
  rememberStreamingHost(dataDir, identity.id);
  return identity;
}

/** Keeps the id (and the port Icecast listens on now) for the next start. */
export function rememberStreamingHost(dataDir: string, id: string, port?: number): void {
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, FILE);
  writeFileSync(`${file}.${process.pid}`, `${JSON.stringify({ id, ...(port && { port }) })}\n`, { mode: 0o600 });
  renameSync(`${file}.${process.pid}`, file);
}
