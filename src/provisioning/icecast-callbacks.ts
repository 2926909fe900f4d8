import type http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { timingSafeEqual } from 'node:crypto';
import { ICECAST_CALLBACK_ACTIONS, type IcecastCallbackAction } from './icecast-config.js';
import { RequestReader, wireResponse, type WireRequest } from './callback-wire.js';
import { PROXY_USER } from './listener-end.js';

// Icecast posts a form for each callback (fields seen on 2.4.4):
//   stream_auth      action mount ip server port user pass (+ admin=1 for a request to /admin on the mount)
//   mount_add/remove action mount server port
//   listener_add     action server port client mount(+query) user pass ip agent
//   listener_remove  the same + duration (seconds)
// It accepts only when the answer carries `icecast-auth-user: 1`; any other answer, a 500 or no
// answer at all is a refusal, so errors thrown by the decider fail closed.

export interface Decision {
  accept: boolean;
  /** Shown by Icecast in its log; keep it short, it travels as a header. */
  message?: string;
  /** Icecast disconnects an accepted listener after this many seconds. */
  timeLimitSeconds?: number;
}

export interface SourceAuthRequest {
  mount: string;
  user: string;
  pass: string;
  ip: string;
}
export interface ListenerAuthRequest {
  mount: string;
  /** The query string the listener put after the mount, e.g. a token. */
  query: Record<string, string>;
  clientId: string;
  ip: string;
  userAgent: string;
  /** HTTP Basic credentials the listener sent, '' when none. */
  user: string;
  pass: string;
  /**
   * How long a full stream waits for a place to be freed before refusing: a listener through HAProxy may come back
   * before HAProxy reports that its earlier connection closed (after a blip, every listener at once).
   */
  waitForPlaceMs?: number;
}
export interface ListenerLeftEvent {
  mount: string;
  query: Record<string, string>;
  clientId: string;
  ip: string;
  durationSeconds: number;
}
export interface MountEvent {
  mount: string;
}

/** What the caller decides; provisioning's data plane knows nothing about orders or the database. */
export interface MountDecider {
  authorizeSource(request: SourceAuthRequest): Decision | Promise<Decision>;
  /** An encoder's title update (/admin/metadata) with the mount's source credentials; without it, as a source. */
  authorizeMetadata?(request: SourceAuthRequest): Decision | Promise<Decision>;
  authorizeListener(request: ListenerAuthRequest): Decision | Promise<Decision>;
  listenerLeft(event: ListenerLeftEvent): void | Promise<void>;
  mountAdded(event: MountEvent): void | Promise<void>;
  mountRemoved(event: MountEvent): void | Promise<void>;
}

const MOUNT_PATH = /^\/[A-Za-z0-9._~!$&'()*+,;=:@%\/-]{1,255}$/;

/** Splits `/mount?token=x` into the mount and its query; null when the mount is not a plain path. */
export function parseMount(raw: string): { mount: string; query: Record<string, string> } | null {
  const q = raw.indexOf('?');
  const mount = q === -1 ? raw : raw.slice(0, q);
  if (!MOUNT_PATH.test(mount) || mount.split('/').some((segment) => segment === '..' || segment === '.')) return null;
  const query = Object.fromEntries(new URLSearchParams(q === -1 ? '' : raw.slice(q + 1)));
  return { mount, query };
}

function isAction(action: string): action is IcecastCallbackAction {
  return (ICECAST_CALLBACK_ACTIONS as readonly string[]).includes(action);
}

const refuse = (message: string): Decision => ({ accept: false, message });
const ACCEPTED: Decision = { accept: true };

/**
 * HAProxy's own admission of a listener (haproxy-admission.ts), in place of Icecast's listener_add: the same form,
 * asked many at once rather than one at a time by Icecast's auth thread. `user` and `pass` are HAProxy's signed ticket
 * (the decider checks the signature and frees the place when HAProxy reports the close); the ticket is the place's
 * client id, since Icecast gives the listener its own id only after this.
 */
export const PROXY_LISTENER_ADD = 'proxy_listener_add';

function proxiedListener(form: Record<string, string>, decider: MountDecider): Decision | Promise<Decision> {
  const parsed = parseMount(form.mount ?? '');
  if (!parsed) return refuse('invalid mount');
  const user = form.user ?? '';
  if (!user.startsWith(PROXY_USER) || !/^[0-9a-fA-F-]{36}$/.test(user.slice(PROXY_USER.length)))
    return refuse('invalid ticket');
  return decider.authorizeListener({
    ...parsed,
    clientId: user,
    ip: form.ip ?? '',
    userAgent: form.agent ?? '',
    user,
    pass: form.pass ?? '',
    waitForPlaceMs: PROXIED_PLACE_WAIT_MS,
  });
}

/** A close HAProxy has seen reaches serve within a few milliseconds; this bounds a loaded host's delay. */
const PROXIED_PLACE_WAIT_MS = 2000;

/**
 * HAProxy's own question about a source (haproxy-admission.ts), in place of Icecast's stream_auth: the source's mount,
 * its Authorization header as it sent it, and its address.
 */
export const PROXY_STREAM_AUTH = 'proxy_stream_auth';

/** The user and password of an HTTP Basic Authorization header ('' for both when it is not one). */
export function basicCredentials(header: string): { user: string; pass: string } {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  const decoded = m ? Buffer.from(m[1], 'base64').toString('utf8') : '';
  const colon = decoded.indexOf(':');
  return colon === -1 ? { user: '', pass: '' } : { user: decoded.slice(0, colon), pass: decoded.slice(colon + 1) };
}

/** The mount, Basic credentials and address HAProxy sends about a source or a title update; null for a bad mount. */
function proxiedSourceRequest(form: Record<string, string>): SourceAuthRequest | null {
  const parsed = parseMount(form.mount ?? '');
  if (!parsed || Object.keys(parsed.query).length > 0) return null;
  return { mount: parsed.mount, ...basicCredentials(form.authorization ?? ''), ip: form.ip ?? '' };
}

/**
 * HAProxy's question about an encoder's title update (`GET /admin/metadata?mount=…&mode=updinfo`, haproxy-metadata.ts),
 * in place of the stream_auth Icecast asks for it (with `admin=1`) when its mounts authenticate: the mount named in the
 * query, the Authorization as sent, and the address.
 */
export const PROXY_METADATA_AUTH = 'proxy_metadata_auth';

function titleUpdate(decider: MountDecider, request: SourceAuthRequest): Decision | Promise<Decision> {
  return decider.authorizeMetadata ? decider.authorizeMetadata(request) : decider.authorizeSource(request);
}

/** Turns one Icecast callback into a call on the decider. Decider errors propagate (the caller answers 500). */
export async function handleIcecastCallback(
  action: string,
  form: Record<string, string>,
  decider: MountDecider,
): Promise<Decision> {
  if (action === PROXY_LISTENER_ADD) return proxiedListener(form, decider);
  if (action === PROXY_STREAM_AUTH || action === PROXY_METADATA_AUTH) {
    const request = proxiedSourceRequest(form);
    if (!request) return refuse('invalid mount');
    return action === PROXY_STREAM_AUTH ? decider.authorizeSource(request) : titleUpdate(decider, request);
  }
  if (!isAction(action)) return refuse('unknown action');
  if (form.action !== undefined && form.action !== action) return refuse('action mismatch');
  const parsed = parseMount(form.mount ?? '');
  if (!parsed) return refuse('invalid mount');
  const { mount, query } = parsed;
  const text = (name: string) => form[name] ?? '';

  switch (action) {
    case 'stream_auth': {
      // A source sending a query string is not one of ours.
      if (Object.keys(query).length > 0) return refuse('invalid mount');
      const request = { mount, user: text('user'), pass: text('pass'), ip: text('ip') };
      // Icecast asks with admin=1 for a request on the mount's admin page (an encoder's title update), not a source.
      return text('admin') === '1' ? titleUpdate(decider, request) : decider.authorizeSource(request);
    }
    case 'listener_add': {
      const clientId = text('client');
      if (!/^\d+$/.test(clientId)) return refuse('invalid client id');
      return decider.authorizeListener({
        mount,
        query,
        clientId,
        ip: text('ip'),
        userAgent: text('agent'),
        user: text('user'),
        pass: text('pass'),
      });
    }
    case 'listener_remove': {
      const durationSeconds = Number.parseInt(text('duration'), 10);
      await decider.listenerLeft({
        mount,
        query,
        clientId: text('client'),
        ip: text('ip'),
        durationSeconds: Number.isFinite(durationSeconds) ? durationSeconds : 0,
      });
      return ACCEPTED;
    }
    case 'mount_add':
      await decider.mountAdded({ mount });
      return ACCEPTED;
    case 'mount_remove':
      await decider.mountRemoved({ mount });
      return ACCEPTED;
  }
}

/** The response headers that tell Icecast the decision. */
export function icecastResponseHeaders(decision: Decision): Record<string, string> {
  const headers: Record<string, string> = {};
  if (decision.accept) {
    headers['icecast-auth-user'] = '1';
    const limit = decision.timeLimitSeconds;
    if (limit !== undefined && Number.isFinite(limit))
      headers['icecast-auth-timelimit'] = String(Math.max(1, Math.floor(limit)));
  }
  if (decision.message) {
    const safe = decision.message
      .replace(/[^\x20-\x7e]/g, ' ')
      .trim()
      .slice(0, 200);
    if (safe) headers['icecast-auth-message'] = safe;
  }
  return headers;
}

/** True when an Authorization header carries exactly these Basic credentials. */
export function hasBasicCredentials(header: string | undefined, expected: { user: string; password: string }): boolean {
  const given = Buffer.from(header ?? '');
  const wanted = Buffer.from(`Basic ${Buffer.from(`${expected.user}:${expected.password}`).toString('base64')}`);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

export interface CallbackServerOptions {
  decider: MountDecider;
  host?: string;
  port?: number;
  /** Require the credentials configured as IcecastConfigOptions.callbackAuth. */
  auth?: { user: string; password: string };
  onError?: (error: unknown) => void;
  /** Each answered callback, with the seconds it took (e.g. for a metric). */
  onAnswered?: (action: string, seconds: number) => void;
  /**
   * A listener HAProxy asked about was refused, with the reason (Icecast logs the refusals of its own callbacks; these
   * it never sees). At most one a second per mount.
   */
  onProxiedRefusal?: (mount: string, message: string) => void;
}

export interface CallbackServer {
  /** Pass this as callbackBaseUrl: callbacks arrive at `${url}/icecast/<action>`. */
  url: string;
  port: number;
  close(): Promise<void>;
}

const MAX_FORM_BYTES = 16 * 1024;

/** Reads Icecast's form-encoded callback body (also usable with Koa's ctx.req). */
export function readCallbackForm(req: http.IncomingMessage): Promise<Record<string, string>> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_FORM_BYTES) req.destroy(new Error('callback form too large'));
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')))));
    req.on('error', reject);
  });
}

// How long closing waits for the callbacks being answered (one cut off mid-request may never end).
const CLOSE_WAIT_MS = 5_000;

async function settledWithin(pending: Set<Promise<void>>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  await Promise.race([Promise.allSettled(pending), timeout]);
  clearTimeout(timer);
}

const REFUSAL_LOG_MS = 1000;

/** Calls `tell` at most once a `REFUSAL_LOG_MS` per mount (a full stream asked in a loop is one line a second). */
function throttledPerMount(tell: (mount: string, message: string) => void): (mount: string, message: string) => void {
  const toldAt = new Map<string, number>();
  return (target, message) => {
    const mount = target.split('?')[0];
    const now = Date.now();
    if (now - (toldAt.get(mount) ?? 0) < REFUSAL_LOG_MS) return;
    if (toldAt.size > 10_000) toldAt.clear();
    toldAt.set(mount, now);
    tell(mount, message);
  };
}

/** Answers one callback request: 404 off the callback paths, 401 without the credentials, else the decision. */
type Answer = (request: WireRequest) => Promise<{ status: number; headers: Record<string, string>; close?: boolean }>;

function callbackAnswer(options: CallbackServerOptions): Answer {
  const { decider, auth, onError = (e) => console.error('icecast callback failed:', e), onAnswered } = options;
  const refusalTold = options.onProxiedRefusal && throttledPerMount(options.onProxiedRefusal);
  return async (request) => {
    const started = performance.now();
    const match = /^\/icecast\/([a-z_]+)$/.exec(request.target);
    if (request.method !== 'POST' || !match) return { status: 404, headers: {} };
    if (auth && !hasBasicCredentials(request.authorization, auth)) return { status: 401, headers: {}, close: true };
    try {
      const form = Object.fromEntries(new URLSearchParams(request.body.toString('utf8')));
      const decision = await handleIcecastCallback(match[1], form, decider);
      if (match[1] === PROXY_LISTENER_ADD && !decision.accept) refusalTold?.(form.mount ?? '', decision.message ?? '');
      onAnswered?.(match[1], (performance.now() - started) / 1000);
      return { status: 200, headers: icecastResponseHeaders(decision) };
    } catch (error) {
      onError(error);
      return { status: 500, headers: {} };
    }
  };
}

// An idle connection is closed after this; HAProxy keeps its idle ones for a few seconds only.
const IDLE_MS = 60_000;

/**
 * Serves one connection: its requests answered in order (the next waits for the one before), kept open until the
 * client closes it, asks to, sends something malformed, or stays idle IDLE_MS.
 */
function serveConnection(socket: net.Socket, answer: Answer, answering: Set<Promise<void>>): void {
  const reader = new RequestReader(MAX_FORM_BYTES);
  let queue = Promise.resolve();
  socket.setNoDelay(true);
  socket.setTimeout(IDLE_MS, () => socket.destroy());
  socket.on('error', () => undefined);
  socket.on('data', (chunk: Buffer) => {
    let requests: WireRequest[];
    try {
      requests = reader.push(chunk);
    } catch {
      // Malformed (WireError) or not: nothing more is read from this connection.
      socket.removeAllListeners('data');
      queue = queue.then(() => void socket.end(wireResponse(400, {}, true)));
      return;
    }
    for (const request of requests) {
      const answered = queue.then(async () => {
        if (socket.destroyed) return;
        const { status, headers, close = request.close } = await answer(request);
        if (close) socket.removeAllListeners('data');
        if (close) socket.end(wireResponse(status, headers, true));
        else socket.write(wireResponse(status, headers, false));
      });
      queue = answered.catch(() => undefined).finally(() => answering.delete(answered));
      answering.add(answered);
    }
  });
}

const CALLBACK_BACKLOG = 4096;

/** A bare HTTP server for the callbacks (callback-wire.ts), for tests and until the main app mounts the handler. */
export async function startCallbackServer(options: CallbackServerOptions): Promise<CallbackServer> {
  const { host = '127.0.0.1', port = 0 } = options;
  const answer = callbackAnswer(options);
  // Callbacks being answered: closing waits for them, as they may still read the database that closes after.
  const answering = new Set<Promise<void>>();
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    serveConnection(socket, answer, answering);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // HAProxy asks about every listener of a burst at once, each on a connection of its own (its httpclient keeps
    // none alive): with node's default backlog of 511, the SYNs beyond it were dropped and their admissions came
    // 15 s later, when HAProxy asked again (the kernel caps the backlog at net.core.somaxconn).
    server.listen({ port, host, backlog: CALLBACK_BACKLOG }, () => resolve());
  });
  const actualPort = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${actualPort}`,
    port: actualPort,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }).then(() => settledWithin(answering, CLOSE_WAIT_MS)),
  };
}
