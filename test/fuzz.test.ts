/**
 * Property-based fuzzing of the whole HTTP surface of one running service (real process, real PostgreSQL, local chain).
 *
 * Invariants checked on every answer:
 *  - an answer at all, and never a 5xx, except 503 with retryable true and a documented reason (machine_payment_not_configured,
 *    store_unavailable, settlement_pending). payment_network_unavailable is not accepted: the local chain is up during the run,
 *    so when it appears the cause is the input;
 *  - every answer carries X-Request-Id (the caller's own when it matches ^[A-Za-z0-9._:-]{1,128}$; Node's own 400/431 answers
 *    to unreadable requests cannot know it);
 *  - every non-2xx answer is an error document {ok:false, error:{code, message, retryable, request_id}} whose request_id is that header;
 *  - every 2xx answer is JSON with ok:true. Exceptions, counted apart: HEAD has no body, OPTIONS answers 200 with Allow and an
 *    empty body, /openapi.json is an OpenAPI document, and the operator endpoints /metrics and /internal/icecast/* only must not 5xx;
 *  - per operation, only the statuses the operation can give (e.g. POST /orders without a valid payment is never 200), and the
 *    exact answer where it is known (401 for a bad key, 400 for a bad Idempotency-Key, 415 for a non-JSON type, 413 above 64 KiB);
 * and after the run: the audit trail, quotes, orders and services grew exactly by what the 200 answers account for, keys used
 * by refused requests are still free, the discovery documents are unchanged, the hash chain verifies and the service is healthy.
 *
 * Every property runs a counted number of cases from a fixed seed, printed first: a run is the same on a fast and on a
 * loaded machine (there is no time limit to pass on), and a failure replays. FUZZ_RUNS (default 200) runs per property;
 * FUZZ_SEED (default 20261126) chooses the inputs, e.g. a new one to look further or a printed one to replay;
 * FUZZ_KEEP_GOING=1 records every violation instead of stopping at the first (no shrinking);
 * FUZZ_SLOW_MS (default 2000) prints requests slower than that. Rate limits are switched off for the fuzzed service.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import pg from 'pg';
import {
  addMember,
  addMemberEverywhere,
  allPaths,
  changeAt,
  deepNesting,
  fromJs,
  keyAt,
  memberPath,
  Obj,
  Raw,
  toText,
  type JsonNode,
} from './support/json-text.js';
import { buildRawRequest, sendRaw, type HeaderValue } from './support/raw-http.js';
import { startService, type Service } from './support/service.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';
import { devFile, type DevFile } from './support/dev-file.js';
import { serveLock } from './support/serve-lock.js';

const RUNS = positiveInt(process.env.FUZZ_RUNS, 200);
const DEFAULT_SEED = 20_261_126;
const SEED = process.env.FUZZ_SEED === undefined ? DEFAULT_SEED : seedFrom(process.env.FUZZ_SEED);
console.log(`[fuzz] seed ${SEED}, ${RUNS} runs per property (replay with FUZZ_SEED=${SEED} FUZZ_RUNS=${RUNS})`);
const KEEP_GOING = process.env.FUZZ_KEEP_GOING === '1';
const PREFIX = '/api/v1';
const MAX_BODY = 64 * 1024;
const DOCUMENTED_503 = new Set([
  'machine_payment_not_configured',
  'store_unavailable',
  'settlement_pending',
  'capacity_exhausted',
]);
const ACCEPTABLE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const IDEMPOTENCY_KEY = /^[\x21-\x7E](?:[\x20-\x7E]{0,253}[\x21-\x7E])?$/;

function positiveInt(text: string | undefined, fallback: number): number {
  const n = Number(text);
  return Number.isInteger(n) && n > 0 ? n : fallback;
}

/** fast-check takes a 32-bit integer seed; anything else would be replaced by a random one, and the run not replay. */
function seedFrom(text: string): number {
  const n = Number(text);
  if (!/^-?\d+$/.test(text.trim()) || !Number.isSafeInteger(n) || n < -(2 ** 31) || n >= 2 ** 32) {
    throw new Error(`FUZZ_SEED=${text} is not a seed: give an integer such as ${DEFAULT_SEED} (as each run prints)`);
  }
  return n;
}

// ---------------------------------------------------------------------------------------------------------------------
// The service and what the run did to it

let service: Service;
let origin: string;
let dev: DevFile;
let databaseUrl: string;
const RUN = `fz${process.pid.toString(36)}${Date.now().toString(36)}`;

/** What accepted requests were allowed to create, and which keys rejected requests used. */
const ledger = {
  quoteIds: new Set<string>(),
  orderIds: new Set<string>(),
  serviceIds: new Set<string>(),
  okQuoteKeys: new Set<string>(),
  okOrderKeys: new Set<string>(),
  rejectedQuoteKeys: new Set<string>(),
  rejectedOrderKeys: new Set<string>(),
  seen503: new Map<string, number>(),
  fetchRefused: new Map<string, number>(),
  optionsWithoutBody: 0,
};

interface Counts {
  auditQuote: number;
  auditOrder: number;
  auditOther: number;
  quotes: number;
  orders: number;
  services: number;
}
let baseline: Counts;
let discoveryBefore: Map<string, string>;
let paymentRequired: string;

before(async () => {
  // Rate limits off: the fuzzer sends a few hundred requests a second with one key, and 429 would hide what is behind.
  service = await startService({ RATE_LIMIT_PER_IP: '0', RATE_LIMIT_PER_KEY: '0' });
  origin = new URL(service.baseUrl).origin;
  dev = await devFile(service);
  databaseUrl = (await serveLock(service)).database_url;
  const ask = await send({
    method: 'POST',
    path: '/orders',
    headers: [...jsonHeaders(), ['Idempotency-Key', `${RUN}-ask`]],
    body: Buffer.from(JSON.stringify(validOrders[0])),
  });
  assert.equal(ask.status, 402, ask.text);
  paymentRequired = ask.headers['payment-required'];
  ledger.rejectedOrderKeys.add(`${RUN}-ask`);
  discoveryBefore = await discoveryDocuments();
  baseline = await counts();
});

after(async () => {
  const fetchRefused = [...ledger.fetchRefused].map(([k, v]) => `${k} ×${v}`).join('; ') || 'none';
  console.log(`[fuzz] inputs fetch would not send (sent on a raw socket instead): ${fetchRefused}`);
  console.log(
    `[fuzz] 503 answers seen: ${[...ledger.seen503].map(([k, v]) => `${k} ×${v}`).join(', ') || 'none'}; OPTIONS 200 without body: ${ledger.optionsWithoutBody}`,
  );
  await service?.stop();
});

async function counts(): Promise<Counts> {
  const listed = await service.cli(['audit', 'list', '--limit', '100000']);
  assert.equal(listed.code, 0, listed.stderr);
  const records = JSON.parse(listed.stdout) as { kind: string }[];
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const [row] = (
      await db.query(
        'SELECT (SELECT count(*) FROM quotes)::int AS quotes, (SELECT count(*) FROM orders)::int AS orders, (SELECT count(*) FROM services)::int AS services',
      )
    ).rows;
    return {
      auditQuote: records.filter((r) => r.kind === 'quote_price').length,
      auditOrder: records.filter((r) => r.kind === 'order_price').length,
      // order_state records (an order's chained claim, settlement, provisioning) are checked by audit verify below.
      auditOther: records.filter((r) => !['quote_price', 'order_price', 'order_state'].includes(r.kind)).length,
      quotes: row.quotes,
      orders: row.orders,
      services: row.services,
    };
  } finally {
    await db.end();
  }
}

async function discoveryDocuments(): Promise<Map<string, string>> {
  const documents = new Map<string, string>();
  for (const path of ['/products', '/products/instant-stream', '/pricing', '/availability', '/openapi.json']) {
    const answer = await send({ method: 'GET', path });
    assert.equal(answer.status, 200, `${path}: ${answer.text.slice(0, 200)}`);
    // /availability counts the host's free places, which the fuzz's accepted orders may take: the rest must not move.
    documents.set(
      path,
      path === '/availability' ? JSON.stringify({ ...answer.json, capacity: undefined }) : answer.text,
    );
  }
  return documents;
}

// ---------------------------------------------------------------------------------------------------------------------
// Sending: fetch when it will send the request as given, else the same bytes on a raw socket

interface FuzzRequest {
  method: string;
  /** After /api/v1, or the whole request target when absolute. */
  path: string;
  absolute?: boolean;
  headers?: [string, HeaderValue][];
  body?: Buffer;
  framing?: 'length' | 'chunked';
  /** Straight to the raw socket (the input is known to be refused by fetch or rewritten by it). */
  raw?: boolean;
}

interface Answer {
  status: number;
  headers: Record<string, string>;
  text: string;
  json?: any;
  via: 'fetch' | 'raw';
  problem?: string;
}

async function send(request: FuzzRequest): Promise<Answer> {
  const target = request.absolute ? request.path : PREFIX + request.path;
  let refusal: string | undefined;
  if (request.raw) refusal = 'raw by construction';
  else if (request.framing === 'chunked') refusal = 'chunked framing chosen';
  else if (request.headers?.some(([, v]) => Buffer.isBuffer(v))) refusal = 'header value given as bytes';
  else {
    const url = new URL(target, origin);
    if (url.pathname + url.search !== target)
      refusal = 'fetch rewrites the request target (.., %2e, spaces, non-ASCII)';
  }
  if (!refusal) {
    let headers: Headers | undefined;
    try {
      headers = new Headers();
      for (const [name, value] of request.headers ?? []) headers.append(name, value as string);
      const response = await fetch(origin + target, {
        method: request.method,
        headers,
        body: request.body as unknown as BodyInit | undefined,
        redirect: 'manual',
      });
      const bytes = Buffer.from(await response.arrayBuffer());
      return answer(response.status, Object.fromEntries(response.headers), bytes, 'fetch');
    } catch (e) {
      const message = (e as Error).message;
      // Sent but not answered: not sent again (the request may have had an effect); reported as no answer.
      if (message === 'fetch failed') {
        const cause = (e as { cause?: { code?: string; message?: string } }).cause;
        return {
          status: 0,
          headers: {},
          text: '',
          via: 'fetch',
          problem: `fetch failed: ${cause?.code ?? cause?.message ?? '?'}`,
        };
      }
      refusal = classifyRefusal(message);
      ledger.fetchRefused.set(refusal, (ledger.fetchRefused.get(refusal) ?? 0) + 1);
    }
  }
  const raw = await sendRaw(
    origin,
    buildRawRequest({
      method: request.method,
      target,
      headers: request.headers ?? [],
      body: request.body,
      framing: request.framing ?? 'length',
      host: new URL(origin).host,
    }),
  );
  return { ...answer(raw.status, raw.headers, raw.body, 'raw'), ...(raw.problem && { problem: raw.problem }) };
}

function classifyRefusal(message: string): string {
  if (/ByteString/.test(message)) return 'header value with a character above U+00FF';
  if (/invalid header value/i.test(message)) return 'header value with NUL, CR or LF (or surrounding whitespace)';
  if (/invalid header name|is an invalid header/i.test(message)) return 'invalid header name';
  if (/method is unsupported|not a valid HTTP method/i.test(message))
    return 'method fetch forbids (TRACE, CONNECT, TRACK) or not a token';
  if (/cannot have body/i.test(message)) return 'GET/HEAD with a body';
  return message.slice(0, 80);
}

function answer(status: number, headers: Record<string, string>, bytes: Buffer, via: 'fetch' | 'raw'): Answer {
  const text = bytes.toString('utf8');
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status, headers, text, json, via };
}

const jsonHeaders = (extra: [string, HeaderValue][] = []): [string, HeaderValue][] => [
  ['Authorization', `Bearer ${service.apiKey}`],
  ['Content-Type', 'application/json'],
  ...extra,
];

// ---------------------------------------------------------------------------------------------------------------------
// Invariants

/** A violation of an invariant: thrown, so fast-check shrinks the input, or collected with FUZZ_KEEP_GOING=1. */
class Violation extends Error {}

interface Expectation {
  /** Statuses this operation may give for this input; anything else is a violation. */
  allow?: number[];
  /** Inputs for which the exact answer is known (e.g. 401 for a wrong key). */
  exact?: { status: number; codes?: string[] };
  /** Operator endpoints outside /api/v1 (/metrics for Prometheus, /internal/icecast/* for Icecast): no 5xx and X-Request-Id only. */
  operator?: boolean;
}

function describeRequest(request: FuzzRequest): string {
  const target = request.absolute ? request.path : PREFIX + request.path;
  const headers = (request.headers ?? [])
    .map(([n, v]) => `${n}: ${JSON.stringify(Buffer.isBuffer(v) ? v.toString('latin1') : v).slice(0, 100)}`)
    .join(' | ');
  const body = request.body
    ? ` body(${request.body.length} B)=${JSON.stringify(request.body.subarray(0, 200).toString('latin1'))}`
    : '';
  return `${request.method} ${JSON.stringify(target.slice(0, 160))}${target.length > 160 ? `…(${target.length})` : ''} [${headers}]${body}${request.framing === 'chunked' ? ' chunked' : ''}`;
}

/** The request id the service must answer with: the caller's own when acceptable, after the transport trims blanks. */
function sentRequestId(request: FuzzRequest): string | undefined {
  const values = (request.headers ?? [])
    .filter(([n]) => n.toLowerCase() === 'x-request-id')
    .map(([, v]) => (Buffer.isBuffer(v) ? v.toString('latin1') : v).replace(/^[ \t]+|[ \t]+$/g, ''));
  if (values.length !== 1) return undefined;
  return ACCEPTABLE_REQUEST_ID.test(values[0]) ? values[0] : undefined;
}

function violations(request: FuzzRequest, got: Answer, expectation: Expectation): string[] {
  const problems: string[] = [];
  const code: string | undefined = got.json?.error?.code;
  if (got.status === 0) return [`no answer at all (${got.problem ?? 'closed'})`];
  if (got.status >= 500) {
    const documented = got.status === 503 && got.json?.error?.retryable === true && DOCUMENTED_503.has(code ?? '');
    if (documented) ledger.seen503.set(code!, (ledger.seen503.get(code!) ?? 0) + 1);
    else problems.push(`${got.status} ${code ?? got.headers['content-type'] ?? ''}`);
  }
  const requestId = got.headers['x-request-id'];
  if (!requestId) problems.push('no X-Request-Id header');
  else {
    const own = sentRequestId(request);
    // Answers Node's parser gives itself (431 headers too large, 400 bad_request) come before any header was read.
    const parserAnswer =
      got.status === 431 ||
      (got.status === 400 &&
        got.json?.error?.code === 'bad_request' &&
        /not well-formed HTTP/.test(got.json.error.message));
    if (own !== undefined && requestId !== own && !parserAnswer)
      problems.push(`X-Request-Id ${JSON.stringify(requestId)} is not the caller's ${JSON.stringify(own)}`);
    if (own === undefined && !/^req_[A-Za-z0-9_-]+$/.test(requestId))
      problems.push(`generated X-Request-Id ${JSON.stringify(requestId)} has an unexpected form`);
  }
  if (expectation.operator) return problems;
  const head = request.method === 'HEAD';
  // The OpenAPI document is the one 200 that is not an {ok:true} envelope.
  const openapi = !request.absolute && /^\/openapi\.json(?:\?|$)/.test(request.path);
  const isJson = /^application\/json\b/i.test(got.headers['content-type'] ?? '');
  if (got.status >= 200 && got.status < 300) {
    if (request.method === 'OPTIONS' && got.text === '' && got.headers.allow !== undefined) ledger.optionsWithoutBody++;
    else if (openapi && got.status === 200 && !head) {
      if (!isJson || typeof got.json?.openapi !== 'string') problems.push(`/openapi.json is not an OpenAPI document`);
    } else if (!head && (!isJson || got.json?.ok !== true))
      problems.push(
        `${got.status} answer is not JSON with ok:true (${got.headers['content-type']}: ${JSON.stringify(got.text.slice(0, 80))})`,
      );
  } else if (!head && got.status >= 300) {
    const e = got.json?.error;
    if (!isJson || got.json?.ok !== false || typeof e !== 'object' || e === null)
      problems.push(
        `${got.status} answer is not an error document (${got.headers['content-type'] ?? 'no content-type'}: ${JSON.stringify(got.text.slice(0, 80))})`,
      );
    else {
      if (typeof e.code !== 'string' || !e.code) problems.push(`${got.status} error.code missing`);
      if (typeof e.message !== 'string' || !e.message) problems.push(`${got.status} ${code} error.message missing`);
      if (typeof e.retryable !== 'boolean') problems.push(`${got.status} ${code} error.retryable is not a boolean`);
      if (e.request_id !== requestId)
        problems.push(
          `${got.status} ${code} error.request_id ${JSON.stringify(e.request_id)} differs from X-Request-Id ${JSON.stringify(requestId)}`,
        );
    }
  }
  if (expectation.allow && !expectation.allow.includes(got.status))
    problems.push(`status ${got.status} ${code ?? ''} is not one of ${expectation.allow.join('/')}`);
  if (expectation.exact) {
    if (
      got.status !== expectation.exact.status ||
      (expectation.exact.codes && !expectation.exact.codes.includes(code ?? ''))
    ) {
      problems.push(
        `expected ${expectation.exact.status} ${expectation.exact.codes?.join('|') ?? ''}, got ${got.status} ${code ?? ''}`,
      );
    }
  }
  return problems;
}

class Tally {
  cases = 0;
  readonly statuses = new Map<string, number>();
  readonly found = new Map<string, { count: number; example: string }>();
  constructor(readonly name: string) {}

  note(got: Answer): void {
    const key = got.status === 0 ? 'none' : `${got.status}${got.json?.error?.code ? ` ${got.json.error.code}` : ''}`;
    this.statuses.set(key, (this.statuses.get(key) ?? 0) + 1);
  }

  /** Records the problems; throws them unless FUZZ_KEEP_GOING. The smallest example of each kind is kept. */
  report(request: FuzzRequest, problems: string[], got: Answer): void {
    if (!problems.length) return;
    const example = `${describeRequest(request)} -> ${got.status} via ${got.via}: ${got.text.slice(0, 240)}`;
    for (const p of problems) {
      const kind = p
        .replace(/"[^"]*"/g, '"…"')
        .replace(/Cannot convert .* to a BigInt/s, 'Cannot convert … to a BigInt')
        .replace(/ {2,}/g, ' ')
        .slice(0, 120);
      const seen = this.found.get(kind);
      if (!seen) this.found.set(kind, { count: 1, example });
      else {
        seen.count++;
        if (example.length < seen.example.length) seen.example = example;
      }
    }
    if (!KEEP_GOING) throw new Violation(`${problems.join('; ')}\n  request: ${example}`);
  }
}

/** A property-specific check; reported like the generic ones. */
function expect(tally: Tally, request: FuzzRequest, got: Answer, ok: boolean, problem: string): void {
  if (!ok) tally.report(request, [problem], got);
}

/** Sends, counts and checks one request; a 5xx is labelled with the cause the service logged for it. */
async function probe(tally: Tally, request: FuzzRequest, expectation: Expectation = {}): Promise<Answer> {
  const started = Date.now();
  const got = await send(request);
  if (Date.now() - started > Number(process.env.FUZZ_SLOW_MS ?? 2000))
    console.log(
      `[fuzz] slow (${Date.now() - started} ms): ${describeRequest(request)} -> ${got.status} via ${got.via} ${got.problem ?? ''}`,
    );
  tally.note(got);
  let problems = violations(request, got, expectation);
  if (problems.length && got.status >= 500) {
    // Only unexpected failures are logged ("request failed", answered 500 internal_error); others name their cause in the message.
    const logged =
      got.json?.error?.code === 'internal_error' ? await serverCause(got.headers['x-request-id']) : undefined;
    const cause = logged ?? (got.json?.error?.message as string | undefined)?.match(/\(([^)]*)\)/)?.[1]?.slice(0, 100);
    if (cause) problems = problems.map((p) => `${p} [${cause}]`);
  }
  tally.report(request, problems, got);
  return got;
}

/** The error the service logged ("request failed") for this request id: its JSON log lines go to stderr, flushed asynchronously. */
async function serverCause(requestId: string | undefined): Promise<string | undefined> {
  if (!requestId) return undefined;
  const needle = `"request_id":${JSON.stringify(requestId)}`;
  for (let i = 0; i < 8; i++) {
    const line = service
      .output()
      .split('\n')
      .reverse()
      .find((l) => l.includes(needle) && l.includes('request failed'));
    if (line) {
      try {
        const err = (JSON.parse(line) as { err?: { type?: string; message?: string } }).err;
        return `${err?.type ?? 'Error'}: ${String(err?.message ?? '')
          .split('\n')[0]
          .slice(0, 100)}`;
      } catch {
        return line.slice(0, 120);
      }
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  return undefined;
}

function format(map: Map<string, number>): string {
  return [...map]
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k}:${v}`)
    .join(', ');
}

/** Runs one property with fast-check and prints its summary line (also when it fails). */
async function property<T>(
  name: string,
  arbitrary: fc.Arbitrary<T>,
  check: (value: T, tally: Tally) => Promise<void>,
  runs = RUNS,
): Promise<void> {
  const tally = new Tally(name);
  const started = Date.now();
  let details: fc.RunDetails<[T]> | undefined;
  try {
    details = await fc.check(
      fc.asyncProperty(arbitrary, async (value) => {
        tally.cases++;
        await check(value, tally);
      }),
      { numRuns: runs, seed: SEED },
    );
  } finally {
    console.log(
      `[fuzz] ${name}: ${details?.numRuns ?? '?'} cases${details?.numShrinks ? ` + ${details.numShrinks} shrinks` : ''} (${tally.cases} calls with shrinking) in ${Date.now() - started} ms, seed ${details?.seed}; statuses ${format(tally.statuses)}`,
    );
    for (const [kind, { count, example }] of tally.found)
      console.log(`[fuzz]   violation ×${count}: ${kind}\n[fuzz]     smallest: ${example}`);
  }
  if (details?.failed) {
    const counterexample = details.counterexample ? fc.stringify(details.counterexample[0]).slice(0, 600) : '?';
    assert.fail(
      `${name}: ${(details.errorInstance as Error | undefined)?.message ?? 'failed'}\n  counterexample: ${counterexample}\n  replay with FUZZ_SEED=${details.seed} (path ${details.counterexamplePath})`,
    );
  }
  assert.equal(details?.numRuns, runs, `${name}: every counted case ran (no time limit cuts a property short)`);
  if (tally.found.size)
    assert.fail(`${name}: ${[...tally.found].map(([k, v]) => `${k} (×${v.count}) e.g. ${v.example}`).join('\n')}`);
}

// ---------------------------------------------------------------------------------------------------------------------
// Inputs

const validQuotes = [
  { product_id: 'instant-stream', parameters: { duration_hours: 2, max_listeners: 10, bitrate_kbps: 128 } },
  {
    product_id: 'event-stream',
    parameters: { duration_hours: 3, max_listeners: 5, bitrate_kbps: 64, autodj: true, transfer_gb: 1.5 },
  },
  {
    product_id: 'temporary-autodj',
    parameters: {
      duration_hours: 48,
      bitrate_kbps: 96,
      storage_mb: 2048,
      transfer_gb: 0.5,
      playlist: 'mix',
      shuffle: true,
    },
  },
];
const validOrders = [
  {
    product_id: 'instant-stream',
    email: 'agent@example.com',
    station_name: 'Fuzz FM',
    parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
  },
  {
    product_id: 'event-stream',
    billing: 'one_time',
    quantity: 1,
    contact_name: 'Agent',
    email: 'agent@example.com',
    station_name: 'Fuzz FM',
    parameters: { duration_hours: 2, max_listeners: 3, bitrate_kbps: 96, transfer_gb: 1 },
    metadata: { ref: 'x' },
  },
  {
    product_id: 'temporary-autodj',
    email: 'agent@example.com',
    station_name: 'Fuzz FM',
    parameters: { duration_hours: 24, bitrate_kbps: 64, storage_mb: 100 },
  },
  {
    product_id: 'radio-directo',
    billing: 'monthly',
    email: 'agent@example.com',
    station_name: 'Fuzz FM',
    parameters: {},
  },
];

const controlFree = (s: string) => s.replace(/[\u0000-\u0008\u000a-\u001f\u007f]/g, '?');
/** Characters Node's HTTP parser accepts in a header value: tab, visible ASCII, space and Latin-1 (obs-text). */
const headerSafeText = (maxLength: number) =>
  fc.string({
    unit: fc
      .oneof(
        { weight: 8, arbitrary: fc.integer({ min: 0x20, max: 0x7e }) },
        fc.constant(0x09),
        fc.integer({ min: 0x80, max: 0xff }),
      )
      .map((c) => String.fromCharCode(c)),
    maxLength,
  });
const unicodeText = (maxLength: number) => fc.string({ unit: 'binary', maxLength }).map(controlFree);

const proto = ['__proto__', 'constructor', 'prototype'];
const memberKey = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(...proto, 'toString', 'valueOf', 'hasOwnProperty', '__defineGetter__', 'isPrototypeOf'),
  },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      'product_id',
      'parameters',
      'duration_hours',
      'max_listeners',
      'bitrate_kbps',
      'transfer_gb',
      'listeners',
      'storage_mb',
      'playlist',
      'shuffle',
      'autodj',
      'email',
      'station_name',
      'billing',
      'quantity',
      'contact_name',
      'metadata',
      'quote_id',
    ),
  },
  fc.constantFrom(
    '',
    ' ',
    'Product_ID',
    'product_id ',
    'product\u0000id',
    '\ud800',
    'duration_hours\u200b',
    'ｐroduct_id',
  ),
  fc.string({ maxLength: 24 }),
);
const pollution = new Obj([
  ['polluted', true],
  ['isAdmin', true],
  ['duration_hours', 1],
  ['max_listeners', 1],
  ['bitrate_kbps', 16],
  ['storage_mb', 1],
  ['required', false],
  ['minimum', -1e9],
  ['maximum', 1e9],
  ['type', 'string'],
]);
const numberLiterals = [
  '1e308',
  '-1e308',
  '-0',
  '0',
  '-1',
  '1e-400',
  '1e400',
  '123456789012345678901234567890',
  '0.1',
  '1.0000000000000000001',
  '5e-324',
  '9007199254740993',
  '1E2',
  '1e+2',
  '2.5',
  '720',
  '720.0000001',
  '721',
  '16',
  '15',
  '128',
  '129',
  '50',
  '51',
  '100',
  '100.0000001',
  '1e-7',
  '0.000001',
  '4.9e-324',
  '1.7976931348623157e308',
  '-1e-400',
  '0e0',
  '1e-9999999999999999999',
];
const notJsonLiterals = [
  'NaN',
  'Infinity',
  '-Infinity',
  '+1',
  '.5',
  '01',
  '1.',
  '0x10',
  '1_000',
  'undefined',
  "'x'",
  'True',
];
const adversarial: fc.Arbitrary<JsonNode> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...numberLiterals).map((t) => new Raw(t)) },
  { weight: 1, arbitrary: fc.constantFrom(...notJsonLiterals).map((t) => new Raw(t)) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      'NaN',
      'Infinity',
      '-Infinity',
      '1',
      '2',
      '24',
      '1e308',
      '-0',
      '',
      '0x10',
      ' 1',
      '1 ',
      'true',
      'null',
      '\u0000',
      'a\u0000b',
      '\ud800',
      'x\udfffy',
      '\ufeff1',
      '١',
      'Ⅻ',
      '../../etc/passwd',
      "'; DROP TABLE quotes;--",
      'qt_',
      'qt_\u0000',
      'http://127.0.0.1/',
      'agent@example.com',
    ),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom<JsonNode>(
      true,
      false,
      null,
      [],
      new Obj([]),
      [1],
      new Obj([['__proto__', pollution]]),
      new Obj([['constructor', new Obj([['prototype', pollution]])]]),
    ),
  },
  { weight: 1, arbitrary: fc.double().map((d) => (Number.isFinite(d) ? d : String(d))) },
  { weight: 1, arbitrary: fc.integer().map((n) => n as JsonNode) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map(fromJs) },
  { weight: 1, arbitrary: unicodeText(30) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 12 }) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.constantFrom(10, 100, 1000, 2000, 5000),
        fc.constantFrom<'array' | 'object' | 'mixed'>('array', 'object', 'mixed'),
      )
      .map(([d, s]) => deepNesting(d, s)),
  },
  { weight: 1, arbitrary: fc.constantFrom(121, 201, 255, 256, 5000, 70_000).map((n) => 'x'.repeat(n)) },
);

type Mutation = {
  op: 'replace' | 'delete' | 'add' | 'duplicate' | 'wrap' | 'as-string' | 'rename';
  pick: number;
  key: string;
  value: JsonNode;
};
const mutation: fc.Arbitrary<Mutation> = fc.record({
  op: fc.constantFrom('replace', 'replace', 'replace', 'delete', 'add', 'duplicate', 'wrap', 'as-string', 'rename'),
  pick: fc.nat(),
  key: memberKey,
  value: adversarial,
});

/** A valid body with one node changed: replaced, removed, repeated, wrapped, turned into a string, or a member added. */
function mutate(base: unknown, m: Mutation): JsonNode {
  const root = fromJs(base);
  const nodes = allPaths(root);
  const { path, node } = nodes[m.pick % nodes.length];
  switch (m.op) {
    case 'replace':
      return changeAt(root, path, () => m.value);
    case 'delete':
      return path.length ? changeAt(root, path, () => undefined) : new Obj([]);
    case 'wrap':
      return changeAt(root, path, (old) => (m.pick % 2 ? [old] : new Obj([['value', old]])));
    case 'as-string':
      return changeAt(root, path, (old) =>
        old instanceof Obj || old instanceof Raw ? toText(old) : JSON.stringify(old),
      );
    case 'add': {
      const objects = nodes.filter((n) => n.node instanceof Obj);
      return addMember(root, objects[m.pick % objects.length].path, m.key, m.value);
    }
    case 'duplicate': {
      const key = keyAt(root, path);
      const parent = path.slice(0, -1);
      return key === undefined ? addMember(root, [], 'product_id', m.value) : addMember(root, parent, key, m.value);
    }
    case 'rename': {
      const key = keyAt(root, path);
      if (key === undefined) return addMember(root, [], m.key, node);
      const renamed = [key.toUpperCase(), `${key} `, ` ${key}`, `${key}\u0000`, m.key][m.pick % 5];
      const parent = path.slice(0, -1);
      return addMember(
        changeAt(root, path, () => undefined),
        parent,
        renamed,
        node,
      );
    }
  }
}

/** Strings a database, a JSON encoder or a log line may choke on. */
const hostileString = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      '\u0000',
      'a\u0000b',
      'qt_\u0000',
      '\u0000'.repeat(100),
      '\ud800',
      '\udfff',
      'x\ud800y',
      '\udc00\ud800',
      '\ufffe',
      '\uffff',
      '\u202e',
      '\u200b',
      '\\u0000',
      '%00',
      'é',
      '😀',
      '\u001b[31m',
      '\r\n',
      '',
    ),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'NaN',
      'Infinity',
      '-Infinity',
      '1',
      '2',
      '24',
      '1e308',
      '-0',
      '0x10',
      ' 1',
      'true',
      'null',
      '[]',
      '{}',
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom(120, 121, 200, 201, 254, 255, 5000, 60_000).map((n) => 'x'.repeat(n)) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "'; DROP TABLE quotes;--",
      '"',
      '\\',
      '${7*7}',
      '{{7*7}}',
      '<script>alert(1)</script>',
      '../../etc/passwd',
      'a@b',
      'agent@example.com\u0000',
      'http://169.254.169.254/',
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
);
const numberLeaf = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...numberLiterals).map((t) => new Raw(t)) },
  { weight: 1, arbitrary: fc.constantFrom(...notJsonLiterals).map((t) => new Raw(t)) },
  { weight: 2, arbitrary: fc.constantFrom(...numberLiterals, 'NaN', 'Infinity', '-Infinity').map((t): JsonNode => t) },
  { weight: 1, arbitrary: fc.double().map((d) => (Number.isFinite(d) ? d : new Raw(String(d)))) },
  { weight: 1, arbitrary: fc.integer().map((n) => n as JsonNode) },
);
const depth = fc.constantFrom(100, 1000, 2000, 2500, 3000, 5000, 10_000, 20_000, 30_000);
const shape = fc.constantFrom<'array' | 'object' | 'mixed'>('array', 'object', 'mixed');

/** The node at pick among those that satisfy which, replaced by value (or the whole body when there is none). */
function replaceLeaf(base: unknown, which: (node: JsonNode) => boolean, pick: number, value: JsonNode): JsonNode {
  const root = fromJs(base);
  const leaves = allPaths(root).filter(({ node }) => which(node));
  if (!leaves.length) return root;
  return changeAt(root, leaves[pick % leaves.length].path, () => value);
}

const jsonBody = (bases: unknown[]) =>
  fc.oneof(
    { weight: 5, arbitrary: fc.tuple(fc.constantFrom(...bases), mutation).map(([b, m]) => toText(mutate(b, m))) },
    {
      weight: 3,
      arbitrary: fc
        .tuple(fc.constantFrom(...bases), fc.nat(), numberLeaf)
        .map(([b, at, v]) => toText(replaceLeaf(b, (n) => typeof n === 'number', at, v))),
    },
    {
      weight: 3,
      arbitrary: fc
        .tuple(fc.constantFrom(...bases), fc.nat(), hostileString, fc.boolean())
        .map(([b, at, v, asQuoteId]) =>
          toText(
            asQuoteId
              ? addMember(fromJs(b), [], 'metadata', new Obj([['quote_id', v]]))
              : replaceLeaf(b, (n) => typeof n === 'string', at, v),
          ),
        ),
    },
    {
      weight: 2,
      arbitrary: fc
        .tuple(fc.constantFrom(...bases), fc.nat(), depth, shape)
        .map(([b, at, d, sh]) => toText(replaceLeaf(b, () => true, at + 1, deepNesting(d, sh)))),
    },
    {
      weight: 2,
      arbitrary: fc
        .tuple(
          fc.constantFrom(...bases),
          fc.constantFrom(...proto),
          fc.constantFrom<JsonNode>(pollution, new Obj([]), null, 'x', [pollution]),
        )
        .map(([b, k, v]) => toText(addMemberEverywhere(fromJs(b), k, v))),
    },
    { weight: 1, arbitrary: fc.constantFrom(...bases).map((b) => JSON.stringify(b)) },
    { weight: 1, arbitrary: fc.jsonValue().map((v) => JSON.stringify(v)) },
    {
      weight: 1,
      arbitrary: fc
        .anything({ maxDepth: 3, withNullPrototype: true, withObjectString: true, withSparseArray: true })
        .map((v) => JSON.stringify(v) ?? ''),
    },
    { weight: 1, arbitrary: fc.object({ key: memberKey, maxDepth: 3 }).map((o) => JSON.stringify(o)) },
    { weight: 1, arbitrary: fc.dictionary(memberKey, fc.jsonValue({ maxDepth: 2 })).map((o) => toText(fromJs(o))) },
  );

/** Invalid UTF-8: lone continuation, overlong, surrogate, beyond U+10FFFF, truncated, and bytes that are never UTF-8. */
const badUtf8 = fc.constantFrom(
  [0xff],
  [0xfe],
  [0x80],
  [0xc0, 0xaf],
  [0xe0, 0x80, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xc3],
  [0xe2, 0x82],
  [0xc3, 0x28],
  [0x00],
);
const contentType = fc.oneof(
  { weight: 6, arbitrary: fc.constant('application/json') },
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      undefined,
      '',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/json; charset=utf-8',
      'application/json; charset=latin1',
      'application/json; charset=utf-16',
      'APPLICATION/JSON',
      'Application/Json',
      'application/vnd.api+json',
      'application/merge-patch+json',
      'application/json, text/plain',
      'application/jsonx',
      'json',
      'application/',
      '/json',
      'application/json;',
      'application/json; boundary="',
      'text/json',
      '*/*',
      'application/*',
      'application/json; charset=utf-8; charset=latin1',
    ),
  },
  { weight: 1, arbitrary: headerSafeText(60) },
);
type RawBody = { what: string; bytes: Buffer; contentType: string | undefined; framing: 'length' | 'chunked' };

const rawBody = (bases: unknown[]): fc.Arbitrary<RawBody> => {
  const base = fc.constantFrom(...bases).map((b) => JSON.stringify(b));
  const pieces: fc.Arbitrary<{ what: string; bytes: Buffer }>[] = [
    fc.tuple(base, fc.nat(), badUtf8).map(([text, at, seq]) => {
      const bytes = Buffer.from(text);
      const quotes = [...text.matchAll(/"/g)].map((m) => m.index!);
      const i = at % 2 ? quotes[at % quotes.length] + 1 : at % (bytes.length + 1);
      return {
        what: 'invalid UTF-8',
        bytes: Buffer.concat([bytes.subarray(0, i), Buffer.from(seq), bytes.subarray(i)]),
      };
    }),
    fc
      .tuple(base, fc.nat())
      .map(([text, at]) => ({ what: 'truncated JSON', bytes: Buffer.from(text.slice(0, at % text.length)) })),
    fc
      .tuple(base, fc.constantFrom('}', ',', ' x', '{}', '\u0000', '//c', ']', '\n{"product_id":"x"}', ' ', '\ufeff'))
      .map(([text, junk]) => ({ what: 'trailing text', bytes: Buffer.from(text + junk) })),
    fc
      .tuple(base, fc.constantFrom([':', '='], ['"', "'"], [',', ',,'], ['{', '{,'], ['}', ',}']))
      .map(([text, [a, b]]) => ({ what: 'broken syntax', bytes: Buffer.from(text.replace(a, b)) })),
    base.map((text) => ({
      what: 'UTF-8 BOM',
      bytes: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]),
    })),
    base.map((text) => ({ what: 'UTF-16LE', bytes: Buffer.from(text, 'utf16le') })),
    fc
      .constantFrom(
        '',
        ' ',
        '\n',
        'null',
        '[]',
        '"str"',
        '1',
        'true',
        '{}',
        '{"":""}',
        '\u0000',
        '{"product_id":"instant-stream"}{"product_id":"event-stream"}',
      )
      .map((t) => ({ what: 'tiny or empty', bytes: Buffer.from(t) })),
    fc
      .tuple(
        fc.constantFrom(100, 1000, 2000, 3000, 5000, 10_000, 20_000, 32_000),
        fc.constantFrom<'array' | 'object' | 'mixed'>('array', 'object', 'mixed'),
        fc.constantFrom('top', 'parameters.x', 'parameters', 'product_id', 'metadata.k'),
      )
      .map(([depth, shape, where]) => {
        const deep = deepNesting(depth, shape).text;
        const text =
          where === 'top'
            ? deep
            : where === 'parameters'
              ? `{"product_id":"instant-stream","email":"a@example.com","station_name":"x","parameters":${'{"p":'.repeat(depth)}1${'}'.repeat(depth)}}`
              : where === 'product_id'
                ? `{"product_id":${deep}}`
                : where === 'metadata.k'
                  ? `{"product_id":"instant-stream","email":"a@example.com","station_name":"x","metadata":{"k":${deep}}}`
                  : `{"product_id":"instant-stream","email":"a@example.com","station_name":"x","parameters":{"x":${deep}}}`;
        return { what: `nesting ${depth} ${shape} at ${where}`, bytes: Buffer.from(text) };
      }),
    fc
      .tuple(base, fc.constantFrom(MAX_BODY - 1, MAX_BODY, MAX_BODY + 1, 100_000, 1_048_576, 1_100_000), fc.boolean())
      .map(([text, size, blank]) => {
        const head = text.slice(0, -1);
        const pad = Math.max(0, size - Buffer.byteLength(head) - (blank ? 1 : 10));
        const padded = blank ? `${head}${' '.repeat(pad)}}` : `${head},"pad":"${'x'.repeat(pad)}"}`;
        return { what: `${size} bytes (${blank ? 'whitespace' : 'string'} padding)`, bytes: Buffer.from(padded) };
      }),
    fc
      .tuple(
        base,
        fc.constantFrom(
          '"product_id":"nope",',
          '"parameters":{},',
          '"product_id":1,',
          '"product_id":"instant-stream","product_id":"event-stream",',
        ),
      )
      .map(([text, dup]) => ({ what: 'duplicate keys', bytes: Buffer.from(`{${dup}${text.slice(1)}`) })),
    fc.tuple(base, fc.constantFrom(...numberLiterals, ...notJsonLiterals), fc.nat()).map(([text, literal, at]) => {
      const numbers = [...text.matchAll(/-?\d+(?:\.\d+)?/g)];
      if (!numbers.length) return { what: 'number literal', bytes: Buffer.from(text) };
      const m = numbers[at % numbers.length];
      return {
        what: `number literal ${literal}`,
        bytes: Buffer.from(text.slice(0, m.index) + literal + text.slice(m.index! + m[0].length)),
      };
    }),
    fc.uint8Array({ maxLength: 300 }).map((b) => ({ what: 'random bytes', bytes: Buffer.from(b) })),
  ];
  return fc
    .record({ piece: fc.oneof(...pieces), contentType, chunked: fc.boolean() })
    .map(({ piece, contentType: type, chunked }) => ({
      ...piece,
      contentType: type,
      framing: chunked ? ('chunked' as const) : ('length' as const),
    }));
};

const requestIdHeader: fc.Arbitrary<string | undefined> = fc.option(
  fc.oneof(
    fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/),
    fc.constantFrom(
      '',
      ' ',
      'a'.repeat(128),
      'a'.repeat(129),
      'req_x',
      '../../etc',
      'café',
      '<script>',
      'a b',
      'x,y',
      'ok\t',
      ' padded ',
    ),
    headerSafeText(200),
    unicodeText(20),
  ),
  { nil: undefined },
);

/** Authorization values: the valid key (often), near misses of it, other schemes, garbage. VALID stands for the key. */
const authorizationHeader: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 6, arbitrary: fc.constant('Bearer VALID') },
  { weight: 1, arbitrary: fc.constant(undefined) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '',
      'Bearer',
      'Bearer ',
      'bearer VALID',
      'BEARER VALID',
      'Bearer  VALID',
      'Bearer VALID extra',
      'Basic dXNlcjpwYXNz',
      'Token VALID',
      'VALID',
      'Bearer aak_0000000000000000_' + 'x'.repeat(43),
      'Bearer aak_',
      'Bearer VALID\t',
      'Bearer\tVALID',
      'Bearer VALIDx',
      'Bearer VALID,Bearer VALID',
      'Bearer ' + 'a'.repeat(6000),
      'Bearer é',
      'Bearer aak_0123456789abcdef_' + 'A'.repeat(43),
    ),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.nat(), fc.integer({ min: 0x21, max: 0x7e }))
      .map(([at, c]) => `Bearer VALID#${at}#${String.fromCharCode(c)}`),
  },
  { weight: 1, arbitrary: headerSafeText(100).map((s) => `Bearer ${s}`) },
  { weight: 1, arbitrary: unicodeText(40) },
);

function authorization(template: string | undefined): string | undefined {
  if (template === undefined) return undefined;
  const mutated = /^Bearer VALID#(\d+)#(.)$/s.exec(template);
  if (mutated) {
    const key = service.apiKey;
    const at = Number(mutated[1]) % key.length;
    return `Bearer ${key.slice(0, at)}${mutated[2]}${key.slice(at + 1)}`;
  }
  return template.replaceAll('VALID', service.apiKey);
}

/** What the service sees of the header: OWS trimmed; the valid key iff Bearer + the key. */
function authorizationValid(value: string | undefined): boolean {
  if (value === undefined) return false;
  return /^Bearer +(\S+)\s*$/i.exec(value.replace(/^[ \t]+|[ \t]+$/g, ''))?.[1] === service.apiKey;
}

const idempotencyHeader: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 2, arbitrary: fc.constant(undefined) },
  { weight: 3, arbitrary: fc.uuid() },
  { weight: 2, arbitrary: fc.stringMatching(/^[\x21-\x7e]{1,40}$/) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '',
      ' ',
      'k'.repeat(255),
      'k'.repeat(256),
      'k'.repeat(1000),
      'a b',
      'ключ',
      'clé',
      'é',
      'emoji😀',
      '\t',
      'x\ty',
      '"quoted"',
      'k'.repeat(254) + 'é',
    ),
  },
  { weight: 1, arbitrary: headerSafeText(300) },
  { weight: 1, arbitrary: unicodeText(40) },
);

/** Node trims blanks; the key must then be 1..255 printable ASCII characters, spaces only inside (characters above U+00FF arrive as UTF-8 bytes). */
function keySeen(value: string | undefined): { present: boolean; valid: boolean; key?: string } {
  if (value === undefined) return { present: false, valid: false };
  const trimmed = value.replace(/^[ \t]+|[ \t]+$/g, '');
  return { present: true, valid: IDEMPOTENCY_KEY.test(trimmed), key: trimmed };
}

function joinedKeySeen(value: string): { present: boolean; valid: boolean; key?: string } {
  const once = keySeen(value).key!;
  const joined = `${once}, ${once}`;
  return { present: true, valid: IDEMPOTENCY_KEY.test(joined), key: joined };
}

const header = (name: string, value: string | undefined): [string, HeaderValue][] =>
  value === undefined ? [] : [[name, value]];

// ---------------------------------------------------------------------------------------------------------------------
// Properties

describe('fuzz', () => {
  test('GET discovery endpoints answer 200 ok:true whatever the query and headers', async () => {
    const endpoint = fc.constantFrom(
      '/health',
      '/products',
      '/products/instant-stream',
      '/products/radio-directo',
      '/pricing',
      '/availability',
      '/openapi.json',
    );
    const query = fc.oneof(
      { weight: 3, arbitrary: fc.constant('') },
      fc.constantFrom(
        '?',
        '?a=1&a=2',
        '?__proto__[x]=1',
        '?constructor.prototype.x=1',
        '?constructor[prototype][x]=1',
        `?${'a'.repeat(4000)}`,
        '?%',
        '?%zz',
        '?a=%00',
        '?#frag',
        '?limit=-1&offset=1e308',
      ),
      fc
        .dictionary(fc.string({ maxLength: 10 }), unicodeText(20), { maxKeys: 4 })
        .map((d) => `?${new URLSearchParams(d as Record<string, string>).toString()}`),
    );
    const arbitrary = fc.record({
      endpoint,
      query,
      requestId: requestIdHeader,
      auth: authorizationHeader,
      accept: fc.option(
        fc.constantFrom('application/json', 'text/html', '*/*', 'application/xml', '', 'application/json;q=0'),
        { nil: undefined },
      ),
      key: idempotencyHeader,
      signature: fc.option(headerSafeText(60), { nil: undefined }),
      type: contentType,
      body: fc.option(fc.constantFrom('{"x":1}', 'garbage', '\u0000'), { nil: undefined }),
    });
    await property('GET discovery', arbitrary, async (v, tally) => {
      const request: FuzzRequest = {
        method: 'GET',
        path: v.endpoint + v.query,
        body: v.body === undefined ? undefined : Buffer.from(v.body),
        headers: [
          ...header('X-Request-Id', v.requestId),
          ...header('Authorization', authorization(v.auth)),
          ...header('Accept', v.accept),
          ...header('Idempotency-Key', v.key),
          ...header('PAYMENT-SIGNATURE', v.signature),
          ...header('Content-Type', v.type),
        ],
      };
      const got = await probe(tally, request, { exact: { status: 200 } });
      if (got.status === 200 && v.endpoint === '/products')
        expect(tally, request, got, got.json?.count === 9, `/products lists ${got.json?.count} products`);
    });
  });

  test('GET /products/{id}: a product or 404 for any path segment', async () => {
    const segment = fc.oneof(
      fc.constantFrom(
        'instant-stream',
        'event-stream',
        'radio-directo',
        'audio-storage-api',
        'no-such-product',
        'INSTANT-STREAM',
        'instant-stream%20',
        'instant-stream%09',
        'a',
        'ab',
        'a'.repeat(81),
        'a'.repeat(82),
        '-a',
        '0a',
      ),
      fc.constantFrom(
        '..',
        '.',
        '%2e%2e',
        '%2E%2E/health',
        '..%2f..%2fhealth',
        '%2F',
        '%00',
        '%zz',
        '%',
        '%%',
        '%u0041',
        '%c0%ae%c0%ae',
        'instant-stream%00',
        'instant%2Dstream',
        '__proto__',
        'constructor',
        'prototype',
        'toString',
        'hasOwnProperty',
        '..;',
        'instant-stream;x=1',
        'instant-stream/',
        'instant-stream/extra',
        '%E2%80%AE',
      ),
      fc.constantFrom(100, 1000, 5000, 12_000).map((n) => 'a'.repeat(n)),
      fc.stringMatching(/^[a-z0-9][a-z0-9-]{1,80}$/),
      unicodeText(40).map(encodeURIComponent),
      fc.string({ unit: 'binary', maxLength: 30 }).map(encodeURIComponent),
    );
    await property('GET /products/{id}', fc.record({ segment, requestId: requestIdHeader }), async (v, tally) => {
      const request: FuzzRequest = {
        method: 'GET',
        path: `/products/${v.segment}`,
        headers: header('X-Request-Id', v.requestId),
      };
      const got = await probe(tally, request, { allow: [200, 404] });
      // "/products/" is the list (the router ignores a trailing slash); otherwise a 200 is the product named.
      const id = decodeURIComponentSafe(v.segment).replace(/\/$/, '');
      if (got.status === 200)
        expect(
          tally,
          request,
          got,
          id === '' ? got.json?.count === 9 : got.json?.product?.id === id,
          `/products/${v.segment} answered ${got.text.slice(0, 80)}`,
        );
    });
  });

  test('unknown routes and methods get error documents', async () => {
    const method = fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS') },
      {
        weight: 2,
        arbitrary: fc.constantFrom(
          'PROPFIND',
          'PROPPATCH',
          'MKCOL',
          'COPY',
          'MOVE',
          'LOCK',
          'UNLOCK',
          'SEARCH',
          'PURGE',
          'REPORT',
          'LINK',
          'UNLINK',
          'MKCALENDAR',
          'SUBSCRIBE',
          'NOTIFY',
          'ACL',
          'BIND',
          'QUERY',
          'TRACE',
          'M-SEARCH',
          'CHECKOUT',
          'MERGE',
          'SOURCE',
        ),
      },
    );
    const path = fc.oneof(
      fc.constantFrom(
        '/health',
        '/products',
        '/products/instant-stream',
        '/pricing',
        '/availability',
        '/openapi.json',
        '/quotes',
        '/orders',
        '/orders/ra_abcdefgh12',
        '/services/abcdefgh12',
        '/services/abcdefgh12/usage',
        '/services/abcdefgh12/files',
        '/services/abcdefgh12/files/a.mp3',
        '/services/abcdefgh12/files/..%2f..%2fetc%2fpasswd',
        '/services/abcdefgh12/playlist',
        '/quotes/qt_x',
        '/keys',
        '/audit',
        '/',
        '',
        '/openapi.yaml',
        '/health/',
        '/products/',
        '/v2/products',
        '//products',
        '/products//instant-stream',
        '/PRODUCTS',
        '/Health',
        '/health.json',
        '/health;x',
        '/health%2F',
      ),
      fc
        .array(fc.oneof(fc.stringMatching(/^[a-zA-Z0-9._~-]{1,20}$/), unicodeText(15).map(encodeURIComponent)), {
          minLength: 1,
          maxLength: 6,
        })
        .map((s) => `/${s.join('/')}`),
    );
    const absolute = fc.constantFrom(
      '/',
      '/api',
      '/api/',
      '/api/v2/products',
      '/API/V1/products',
      '/api/v1',
      '/favicon.ico',
      '/robots.txt',
      '/.env',
      '/internal',
      '/internal/icecast',
      '*',
      '/metrics',
      '/internal/icecast/listener_add',
      '/internal/icecast/mount_add',
      '/internal/icecast/%00',
    );
    const arbitrary = fc.record({
      method,
      path: fc.oneof(
        { weight: 4, arbitrary: path.map((p) => ({ path: p, absolute: false })) },
        absolute.map((p) => ({ path: p, absolute: true })),
      ),
      requestId: requestIdHeader,
      auth: authorizationHeader,
      body: fc.option(jsonBody(validQuotes), { nil: undefined }),
    });
    await property('routes and methods', arbitrary, async (v, tally) => {
      const body = v.body === undefined || v.method === 'GET' || v.method === 'HEAD' ? undefined : Buffer.from(v.body);
      const headers: [string, HeaderValue][] = [
        ...header('X-Request-Id', v.requestId),
        ...header('Authorization', authorization(v.auth)),
        ...(body ? [['Content-Type', 'application/json'] as [string, string]] : []),
      ];
      const orderKey = `${RUN}-r-${tally.cases}`;
      if (v.method === 'POST' && v.path.path === '/orders' && !v.path.absolute)
        headers.push(['Idempotency-Key', orderKey]);
      const operator =
        v.path.absolute &&
        (/^\/internal\/icecast\/./.test(v.path.path) ||
          (v.path.path === '/metrics' && (v.method === 'GET' || v.method === 'HEAD')));
      const got = await probe(
        tally,
        { method: v.method, path: v.path.path, absolute: v.path.absolute, headers, body },
        { operator },
      );
      account(
        {
          method: v.method,
          path: v.path.absolute ? v.path.path : PREFIX + v.path.path,
          auth: authorization(v.auth),
          key: headers.find(([n]) => n === 'Idempotency-Key')?.[1] as string | undefined,
        },
        got,
      );
    });
  });

  test('POST /quotes with random and near-valid JSON bodies', async () => {
    const keyPool = Array.from({ length: 4 }, (_, i) => `${RUN}-qpool-${i}`);
    const arbitrary = fc.record({
      body: jsonBody(validQuotes),
      key: fc.option(fc.oneof(fc.constantFrom(...keyPool), fc.uuid()), { nil: undefined }),
      requestId: requestIdHeader,
    });
    await property('POST /quotes JSON bodies', arbitrary, async (v, tally) => {
      const got = await probe(
        tally,
        {
          method: 'POST',
          path: '/quotes',
          headers: jsonHeaders([...header('Idempotency-Key', v.key), ...header('X-Request-Id', v.requestId)]),
          body: Buffer.from(v.body),
        },
        { allow: [200, 404, 409, 413, 422] },
      );
      account({ method: 'POST', path: `${PREFIX}/quotes`, auth: `Bearer ${service.apiKey}`, key: v.key }, got);
    });
  });

  test('POST /orders (no payment) with random and near-valid JSON bodies', async () => {
    const arbitrary = fc.record({ body: jsonBody(validOrders), key: fc.uuid(), requestId: requestIdHeader });
    await property('POST /orders JSON bodies', arbitrary, async (v, tally) => {
      const key = `${RUN}-o-${v.key}`;
      const got = await probe(
        tally,
        {
          method: 'POST',
          path: '/orders',
          headers: jsonHeaders([['Idempotency-Key', key], ...header('X-Request-Id', v.requestId)]),
          body: Buffer.from(v.body),
        },
        { allow: [402, 404, 409, 413, 422] },
      );
      account({ method: 'POST', path: `${PREFIX}/orders`, auth: `Bearer ${service.apiKey}`, key }, got);
      if (got.status === 402)
        expect(
          tally,
          { method: 'POST', path: '/orders' },
          got,
          !!got.headers['payment-required'],
          '402 without PAYMENT-REQUIRED',
        );
    });
  });

  test('POST /quotes and /orders with malformed bytes, content types, sizes, nesting and framing', async () => {
    const arbitrary = fc.record({
      target: fc.constantFrom('/quotes', '/orders'),
      quoteBody: rawBody(validQuotes),
      orderBody: rawBody(validOrders),
      key: fc.uuid(),
      requestId: requestIdHeader,
    });
    await property('POST raw bodies', arbitrary, async (v, tally) => {
      const body = v.target === '/quotes' ? v.quoteBody : v.orderBody;
      const key = `${RUN}-b-${v.key}`;
      const headers: [string, HeaderValue][] = [
        ['Authorization', `Bearer ${service.apiKey}`],
        ...header('Content-Type', body.contentType),
        ['Idempotency-Key', key],
        ...header('X-Request-Id', v.requestId),
      ];
      // Koa's request.type: the Content-Type up to ";", as sent (case and blanks kept); JSON is application/json or *+json.
      const type = (body.contentType ?? '').replace(/^[ \t]+|[ \t]+$/g, '').split(';')[0];
      // Media types are case-insensitive (RFC 9110): APPLICATION/JSON is JSON.
      const jsonType = type.toLowerCase() === 'application/json' || type.toLowerCase().endsWith('+json');
      const exact = !jsonType
        ? { status: 415, codes: ['unsupported_media_type'] }
        : body.bytes.length > MAX_BODY
          ? { status: 413, codes: ['body_too_large'] }
          : undefined;
      const got = await probe(
        tally,
        { method: 'POST', path: v.target, headers, body: body.bytes, framing: body.framing },
        {
          allow: v.target === '/quotes' ? [200, 404, 409, 413, 415, 422] : [402, 404, 409, 413, 415, 422],
          ...(exact && { exact }),
        },
      );
      account({ method: 'POST', path: PREFIX + v.target, auth: `Bearer ${service.apiKey}`, key }, got);
    });
  });

  test('Authorization, Idempotency-Key and X-Request-Id headers on POST /quotes and /orders', async () => {
    const arbitrary = fc.record({
      target: fc.constantFrom('/quotes', '/orders'),
      auth: authorizationHeader,
      key: idempotencyHeader,
      requestId: requestIdHeader,
      quote: fc.constantFrom(...validQuotes),
      order: fc.constantFrom(...validOrders),
      repeatHeader: fc.constantFrom('none', 'Authorization', 'Idempotency-Key', 'X-Request-Id'),
    });
    await property('auth and key headers', arbitrary, async (v, tally) => {
      const auth = authorization(v.auth);
      const headers: [string, HeaderValue][] = [
        ['Content-Type', 'application/json'],
        ...header('Authorization', auth),
        ...header('Idempotency-Key', v.key),
        ...header('X-Request-Id', v.requestId),
      ];
      // A repeated header reaches Koa joined with ", " (or, for Authorization, the first one only).
      const repeated = v.repeatHeader !== 'none' ? headers.find(([n]) => n === v.repeatHeader) : undefined;
      if (repeated) headers.push(repeated);
      const keyJoined = repeated?.[0] === 'Idempotency-Key';
      // Sent twice, the key reaches the service as one value, "<key>, <key>" (fetch and Node's parser both join so).
      const key = keyJoined ? joinedKeySeen(v.key!) : keySeen(v.key);
      // Two blank keys join to ", ", which fetch trims to "," (a valid key) and a raw request does not.
      const ambiguousKey = key.key === ', ';
      const authOk = authorizationValid(auth);
      const exact =
        repeated?.[0] === 'Authorization' || ambiguousKey
          ? undefined
          : !authOk
            ? { status: 401, codes: ['authentication_required', 'invalid_api_key'] }
            : v.target === '/orders' && !key.valid
              ? { status: 400, codes: ['idempotency_key_missing'] }
              : v.target === '/quotes' && key.present && !key.valid
                ? { status: 422, codes: ['idempotency_key_invalid'] }
                : undefined;
      const body = Buffer.from(JSON.stringify(v.target === '/quotes' ? v.quote : v.order));
      const got = await probe(
        tally,
        { method: 'POST', path: v.target, headers, body },
        {
          allow: v.target === '/quotes' ? [200, 401, 409, 422] : [400, 401, 402, 409],
          ...(exact && { exact }),
        },
      );
      account(
        {
          method: 'POST',
          path: PREFIX + v.target,
          auth: repeated?.[0] === 'Authorization' ? undefined : auth,
          key: ambiguousKey ? undefined : key.key,
        },
        got,
      );
    });
  });

  test('PAYMENT-SIGNATURE: malformed Base64, malformed JSON in Base64, x402 payloads with random fields', async () => {
    const required = decodePaymentRequiredHeader(paymentRequired);
    const accepted = required.accepts[0];
    const hex = (bytes: number) =>
      fc.uint8Array({ minLength: bytes, maxLength: bytes }).map((b) => `0x${Buffer.from(b).toString('hex')}`);
    const payload = fc
      .record({ from: hex(20), nonce: hex(32), signature: hex(65) })
      .map(({ from, nonce, signature }) => ({
        x402Version: 2,
        resource: required.resource,
        accepted,
        payload: {
          signature,
          authorization: {
            from,
            to: accepted.payTo,
            value: accepted.amount,
            validAfter: '0',
            validBefore: String(Math.floor(Date.now() / 1000) + 600),
            nonce,
          },
        },
      }));
    const encode = fc.constantFrom('base64', 'base64url', 'base64-unpadded', 'base64-spaced', 'base64-junk');
    const encoded = (text: string, how: string) => {
      const b64 = Buffer.from(text).toString('base64');
      switch (how) {
        case 'base64url':
          return Buffer.from(text).toString('base64url');
        case 'base64-unpadded':
          return b64.replace(/=+$/, '');
        case 'base64-spaced':
          return b64.replace(/(.{16})/g, '$1 ');
        case 'base64-junk':
          return `${b64.slice(0, 10)}!*${b64.slice(10)}`;
        default:
          return b64;
      }
    };
    const fieldValue = fc.oneof(
      hostileString,
      numberLeaf,
      fc.constantFrom<JsonNode>(
        null,
        true,
        [],
        new Obj([]),
        new Obj([['__proto__', pollution]]),
        '0x',
        '0x00',
        `0x${'0'.repeat(64)}`,
        `0x${'f'.repeat(40)}`,
        '-1',
        '0x-1',
        '1e3',
      ),
    ) as fc.Arbitrary<JsonNode>;
    const fields = [
      ...['from', 'to', 'value', 'validAfter', 'validBefore', 'nonce'].map((f) => ['payload', 'authorization', f]),
      ['payload', 'signature'],
      ['payload', 'authorization'],
      ['payload'],
      ['x402Version'],
      ['accepted'],
      ['accepted', 'amount'],
      ['resource'],
    ];
    /** One field of a well-formed payload replaced (or, without a value, removed). */
    const targeted = fc
      .tuple(payload, fc.constantFrom(...fields), fc.option(fieldValue, { nil: undefined }), encode)
      .map(([p, keys, value, how]) => {
        const root = fromJs(p);
        const path = memberPath(root, keys)!;
        return encoded(toText(changeAt(root, path, () => value)), how);
      });
    const signature = fc.oneof(
      { weight: 4, arbitrary: targeted },
      {
        weight: 3,
        arbitrary: fc.tuple(payload, mutation, encode).map(([p, m, how]) => encoded(toText(mutate(p, m)), how)),
      },
      { weight: 1, arbitrary: fc.tuple(payload, encode).map(([p, how]) => encoded(JSON.stringify(p), how)) },
      {
        weight: 1,
        arbitrary: fc.tuple(payload, fc.nat()).map(([p, at]) => {
          const t = JSON.stringify(p);
          return Buffer.from(t.slice(0, at % t.length)).toString('base64');
        }),
      },
      {
        weight: 1,
        arbitrary: fc.jsonValue({ maxDepth: 3 }).map((j) => Buffer.from(JSON.stringify(j)).toString('base64')),
      },
      { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString('base64')) },
      { weight: 1, arbitrary: fc.base64String({ maxLength: 200 }) },
      { weight: 1, arbitrary: headerSafeText(200) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          '',
          '=',
          '====',
          'not base64!',
          'e30=',
          'W10=',
          'bnVsbA==',
          'MQ==',
          'InN0ciI=',
          'eyJ4NDAyVmVyc2lvbiI6Mn0=',
          'eyJ4NDAyVmVyc2lvbiI6IjIifQ==',
          'A'.repeat(12_000),
          `data:application/json;base64,${Buffer.from('{}').toString('base64')}`,
        ),
      },
      {
        weight: 1,
        arbitrary: fc
          .tuple(payload, fc.constantFrom(...proto))
          .map(([p, k]) => Buffer.from(toText(addMemberEverywhere(fromJs(p), k, pollution))).toString('base64')),
      },
    );
    const arbitrary = fc.record({
      signature,
      key: fc.uuid(),
      order: fc.constantFrom(validOrders[0], validOrders[2]),
      requestId: requestIdHeader,
    });
    await property('PAYMENT-SIGNATURE', arbitrary, async (v, tally) => {
      const key = `${RUN}-p-${v.key}`;
      // A header beyond Node's 16 KiB limit is refused with 431 before the route runs.
      const got = await probe(
        tally,
        {
          method: 'POST',
          path: '/orders',
          headers: jsonHeaders([
            ['Idempotency-Key', key],
            ['PAYMENT-SIGNATURE', v.signature],
            ...header('X-Request-Id', v.requestId),
          ]),
          body: Buffer.from(JSON.stringify(v.order)),
        },
        { allow: v.signature.length > 15_000 ? [431] : [402, 409] },
      );
      account({ method: 'POST', path: `${PREFIX}/orders`, auth: `Bearer ${service.apiKey}`, key }, got);
    });
  });

  test('PAYMENT-SIGNATURE: really signed x402 payments with one field changed after signing', async () => {
    const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
    const fields = [
      'x402Version',
      'resource',
      'resource.url',
      'resource.mimeType',
      'accepted',
      'accepted.scheme',
      'accepted.network',
      'accepted.amount',
      'accepted.asset',
      'accepted.payTo',
      'accepted.maxTimeoutSeconds',
      'accepted.extra',
      'accepted.extra.name',
      'payload',
      'payload.signature',
      'payload.authorization',
      'payload.authorization.from',
      'payload.authorization.to',
      'payload.authorization.value',
      'payload.authorization.validAfter',
      'payload.authorization.validBefore',
      'payload.authorization.nonce',
      'extensions',
      '__proto__',
      'payload.authorization.__proto__',
    ];
    const value = fc.oneof(
      fc.constantFrom<unknown>(
        undefined,
        null,
        '',
        0,
        -1,
        1e308,
        -0,
        'NaN',
        'Infinity',
        '\u0000',
        'a\u0000',
        '0x',
        '0x00',
        '1'.repeat(100),
        [],
        {},
        true,
        '0xZZ',
        ` ${'0'.repeat(10)}`,
        { polluted: true },
        2,
        '2',
        'eip155:1',
        'exact',
        'upto',
      ),
      fc.integer(),
      fc.string({ maxLength: 30 }),
      fc.jsonValue({ maxDepth: 2 }),
    );
    const arbitrary = fc.record({
      field: fc.constantFrom(...fields),
      value,
      keep: fc.nat({ max: 19 }),
      requestId: requestIdHeader,
    });
    const runs = Math.max(5, Math.round(RUNS / 5));
    await property(
      'signed payments, one field changed',
      arbitrary,
      async (v, tally) => {
        const changed = v.keep !== 0; // 1 in 20 is sent unchanged: a real purchase, which the ledger must account for
        const header402 = paymentRequired;
        const signature = await wallet.pay(header402, (p) => {
          if (!changed) return;
          const steps = v.field.split('.');
          let target = p as unknown as Record<string, unknown>;
          for (const step of steps.slice(0, -1)) {
            if (typeof target[step] !== 'object' || target[step] === null) target[step] = {};
            target = target[step] as Record<string, unknown>;
          }
          const last = steps[steps.length - 1];
          if (v.value === undefined) delete target[last];
          else
            Object.defineProperty(target, last, {
              value: v.value,
              enumerable: true,
              writable: true,
              configurable: true,
            });
        });
        const key = `${RUN}-s-${tally.cases}-${Date.now()}`;
        const got = await probe(
          tally,
          {
            method: 'POST',
            path: '/orders',
            headers: jsonHeaders([
              ['Idempotency-Key', key],
              ['PAYMENT-SIGNATURE', signature],
              ...header('X-Request-Id', v.requestId),
            ]),
            body: Buffer.from(JSON.stringify(validOrders[0])),
          },
          { allow: [200, 402, 409] },
        );
        account({ method: 'POST', path: `${PREFIX}/orders`, auth: `Bearer ${service.apiKey}`, key }, got);
        expect(
          tally,
          { method: 'POST', path: '/orders' },
          got,
          changed || got.status === 200,
          'an unchanged signed payment was refused',
        );
      },
      runs,
    );
  });

  test('GET /orders/{id} and /services/{id} with random ids and keys', async () => {
    const id = fc.oneof(
      fc.stringMatching(/^ra_[a-zA-Z0-9_-]{8,120}$/),
      fc.stringMatching(/^[a-zA-Z0-9_-]{8,120}$/),
      fc.constantFrom(
        '..',
        '.',
        '%2e%2e',
        '%00',
        '%zz',
        '%',
        'ra_' + 'a'.repeat(121),
        'a'.repeat(5000),
        "ra_'%20OR%20'1'%3D'1",
        'ra_%00aaaaaaaa',
        'ra_aaaaaaaa%00',
        '__proto__',
        'constructor',
        'ra_',
        'ra_aaaaaaa',
        '%E2%80%AEaaaaaaaa',
      ),
      unicodeText(40).map(encodeURIComponent),
    );
    const arbitrary = fc.record({
      kind: fc.constantFrom('orders', 'services'),
      id,
      auth: authorizationHeader,
      requestId: requestIdHeader,
    });
    await property('GET /orders|services/{id}', arbitrary, async (v, tally) => {
      const auth = authorization(v.auth);
      const mine = v.kind === 'orders' ? ledger.orderIds.has(v.id) : ledger.serviceIds.has(v.id);
      const request: FuzzRequest = {
        method: 'GET',
        path: `/${v.kind}/${v.id}`,
        headers: [...header('Authorization', auth), ...header('X-Request-Id', v.requestId)],
      };
      // An empty id is another route: GET /orders (405, POST only) or /services (the caller's list).
      if (v.id === '') {
        await probe(tally, request, { allow: [200, 401, 402, 405] });
        return;
      }
      // Services also take wallet sign-in: with no credentials at all they answer the 402 sign-in challenge, except
      // for an id that cannot be a service's (the challenge would name it, however long).
      const noCredentials = v.kind === 'services' && (auth ?? '').replace(/^[ \t]+|[ \t]+$/g, '') === '';
      const impossibleService = v.kind === 'services' && !/^[a-zA-Z0-9_-]{8,120}$/.test(decodeURIComponentSafe(v.id));
      await probe(tally, request, {
        exact: impossibleService
          ? { status: 404, codes: ['service_not_found'] }
          : noCredentials
            ? { status: 402, codes: ['authentication_required'] }
            : !authorizationValid(auth)
              ? { status: 401, codes: ['authentication_required', 'invalid_api_key'] }
              : mine
                ? { status: 200 }
                : { status: 404, codes: [v.kind === 'orders' ? 'order_not_found' : 'service_not_found'] },
      });
    });
  });

  test("inputs Node's HTTP parser handles itself (control characters, oversized headers, odd methods and targets)", async () => {
    const control = fc
      .constantFrom(0x00, 0x01, 0x07, 0x08, 0x0b, 0x0c, 0x0d, 0x0e, 0x1b, 0x1f, 0x7f, 0x0a)
      .map((c) => String.fromCharCode(c));
    const name = fc.constantFrom(
      'X-Request-Id',
      'Idempotency-Key',
      'Authorization',
      'PAYMENT-SIGNATURE',
      'Content-Type',
      'Accept',
    );
    const input = fc.oneof(
      fc.record({
        kind: fc.constant('control character in a header value' as const),
        name,
        before: fc.stringMatching(/^[a-z0-9]{0,10}$/),
        control,
        after: fc.stringMatching(/^[a-z0-9]{0,10}$/),
      }),
      fc.record({
        kind: fc.constant('header over 16 KB' as const),
        size: fc.constantFrom(17_000, 40_000, 100_000),
        name,
      }),
      fc.record({
        kind: fc.constant('method' as const),
        method: fc.constantFrom('FOO', 'get', 'post', 'patch', 'GET ', 'G\u0000T', 'CONNECT', 'TRACK', 'BREW', ''),
      }),
      fc.record({
        kind: fc.constant('request target' as const),
        target: fc.constantFrom(
          '/api/v1/hea lth',
          '/api/v1/products/café',
          '/api/v1/products/\u0000',
          '/api/v1/products/\u007f',
          'http://evil.example/api/v1/health',
          'api/v1/health',
          '/api/v1/health#frag',
          '/api/v1/health?x=\u0001',
        ),
      }),
      fc.record({
        kind: fc.constant('protocol' as const),
        variant: fc.constantFrom(
          'no Host',
          'HTTP/1.0',
          'HTTP/2.0',
          'HTTP/1.1 with two Host',
          'conflicting Content-Length',
          'bad chunk size',
          'Content-Length and chunked',
          'negative Content-Length',
          'header without colon',
          'space before colon',
        ),
      }),
    );
    await property(
      'parser-level inputs',
      fc.record({ input, requestId: requestIdHeader }),
      async ({ input: v }, tally) => {
        let request: FuzzRequest;
        const health = `${PREFIX}/health`;
        switch (v.kind) {
          case 'control character in a header value':
            request = {
              method: v.name === 'X-Request-Id' || v.name === 'Accept' ? 'GET' : 'POST',
              path: v.name === 'X-Request-Id' || v.name === 'Accept' ? '/health' : '/quotes',
              headers: jsonHeaders([[v.name, Buffer.from(v.before + v.control + v.after, 'latin1')]]),
              body: Buffer.from(JSON.stringify(validQuotes[0])),
            };
            break;
          case 'header over 16 KB':
            request = { method: 'GET', path: '/health', headers: [[v.name, 'a'.repeat(v.size)]] };
            break;
          case 'method':
            request = { method: v.method, path: '/health', raw: true };
            break;
          case 'request target':
            request = { method: 'GET', path: v.target, absolute: true, raw: true };
            break;
          case 'protocol': {
            const bytes: Record<string, string> = {
              'no Host': `GET ${health} HTTP/1.1\r\nConnection: close\r\n\r\n`,
              'HTTP/1.0': `GET ${health} HTTP/1.0\r\n\r\n`,
              'HTTP/2.0': `GET ${health} HTTP/2.0\r\nHost: x\r\nConnection: close\r\n\r\n`,
              'HTTP/1.1 with two Host': `GET ${health} HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n`,
              'conflicting Content-Length': `POST ${PREFIX}/quotes HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}`,
              'bad chunk size': `POST ${PREFIX}/quotes HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
              'Content-Length and chunked': `POST ${PREFIX}/quotes HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`,
              'negative Content-Length': `POST ${PREFIX}/quotes HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: -1\r\n\r\n{}`,
              'header without colon': `GET ${health} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Broken\r\n\r\n`,
              'space before colon': `GET ${health} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Request-Id : abc\r\n\r\n`,
            };
            const raw = await sendRaw(origin, Buffer.from(bytes[v.variant], 'latin1'));
            const got = {
              ...answer(raw.status, raw.headers, raw.body, 'raw'),
              ...(raw.problem && { problem: raw.problem }),
            };
            tally.note(got);
            tally.report(
              { method: 'RAW', path: v.variant, absolute: true },
              violations({ method: 'RAW', path: '' }, got, {}),
              got,
            );
            return;
          }
        }
        await probe(tally, request);
      },
    );
  });

  test('regressions: inputs that once broke an invariant, sent every run', async () => {
    const tally = new Tally('regressions');
    const required = decodePaymentRequiredHeader(paymentRequired);
    const payment = (change: (p: any) => void) => {
      const p: any = {
        x402Version: 2,
        resource: required.resource,
        accepted: required.accepts[0],
        payload: {
          signature: `0x${'11'.repeat(65)}`,
          authorization: {
            from: `0x${'22'.repeat(20)}`,
            to: required.accepts[0].payTo,
            value: required.accepts[0].amount,
            validAfter: '0',
            validBefore: String(Math.floor(Date.now() / 1000) + 600),
            nonce: `0x${'33'.repeat(32)}`,
          },
        },
      };
      change(p);
      return Buffer.from(JSON.stringify(p)).toString('base64');
    };
    const autodj = (playlist: string) =>
      JSON.stringify({
        product_id: 'temporary-autodj',
        parameters: { duration_hours: 10, bitrate_kbps: 64, storage_mb: 100, playlist },
      });
    const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
    const order = JSON.stringify(validOrders[0]);
    const cases: { what: string; request: FuzzRequest; allow: number[] }[] = [
      {
        what: 'NUL in a string parameter',
        request: { method: 'POST', path: '/quotes', headers: jsonHeaders(), body: Buffer.from(autodj('a\u0000b')) },
        allow: [200, 422],
      },
      {
        what: 'lone surrogate in a string parameter',
        request: { method: 'POST', path: '/quotes', headers: jsonHeaders(), body: Buffer.from(autodj('a\ud800b')) },
        allow: [200, 422],
      },
      {
        what: '5000 nested arrays in a quote',
        request: {
          method: 'POST',
          path: '/quotes',
          headers: jsonHeaders(),
          body: Buffer.from(`{"product_id":"instant-stream","parameters":{"x":${deep(5000)}}}`),
        },
        allow: [413, 422],
      },
      {
        what: '5000 nested arrays in an order',
        request: {
          method: 'POST',
          path: '/orders',
          headers: jsonHeaders([['Idempotency-Key', `${RUN}-reg-deep`]]),
          body: Buffer.from(
            `{"product_id":"instant-stream","email":"a@example.com","station_name":"x","parameters":{"x":${deep(5000)}}}`,
          ),
        },
        allow: [413, 422],
      },
      {
        what: 'NUL in metadata.quote_id',
        request: {
          method: 'POST',
          path: '/orders',
          headers: jsonHeaders([['Idempotency-Key', `${RUN}-reg-quote-id`]]),
          body: Buffer.from(JSON.stringify({ ...validOrders[0], metadata: { quote_id: 'qt_\u0000' } })),
        },
        allow: [422],
      },
      ...(
        [
          [
            'NUL in authorization.from',
            (p: any) => {
              p.payload.authorization.from = '\u0000';
            },
          ],
          [
            'NUL in authorization.nonce',
            (p: any) => {
              p.payload.authorization.nonce = 'a\u0000';
            },
          ],
          [
            'authorization.value not a number',
            (p: any) => {
              p.payload.authorization.value = 'abc';
            },
          ],
          [
            'authorization.validBefore not a number',
            (p: any) => {
              p.payload.authorization.validBefore = 'abc';
            },
          ],
          [
            'signature a number',
            (p: any) => {
              p.payload.signature = 42;
            },
          ],
          [
            'signature missing',
            (p: any) => {
              delete p.payload.signature;
            },
          ],
        ] as const
      ).map(([what, change], i) => ({
        what: `PAYMENT-SIGNATURE with ${what}`,
        request: {
          method: 'POST',
          path: '/orders',
          headers: jsonHeaders([
            ['Idempotency-Key', `${RUN}-reg-pay-${i}`],
            ['PAYMENT-SIGNATURE', payment(change)],
          ]),
          body: Buffer.from(order),
        } as FuzzRequest,
        allow: [402],
      })),
      {
        what: 'a method Node parses but no route implements',
        request: { method: 'PROPFIND', path: '/health' },
        allow: [405],
      },
      { what: 'the same on an unknown path', request: { method: 'SEARCH', path: '/nothing' }, allow: [404, 405] },
      { what: 'CONNECT', request: { method: 'CONNECT', path: '/health', raw: true }, allow: [400, 404, 405] },
    ];
    for (const c of cases) {
      try {
        await probe(tally, c.request, { allow: c.allow });
      } catch (e) {
        if (!(e instanceof Violation)) throw e;
      }
    }
    const noHost = await sendRaw(origin, Buffer.from(`GET ${PREFIX}/health HTTP/1.1\r\nConnection: close\r\n\r\n`));
    const noHostAnswer = {
      ...answer(noHost.status, noHost.headers, noHost.body, 'raw'),
      ...(noHost.problem && { problem: noHost.problem }),
    };
    tally.note(noHostAnswer);
    const noHostRequest: FuzzRequest = { method: 'GET', path: '/health (HTTP/1.1 without Host)' };
    // Without Host the request is still answered by the API itself (serve turns off Node's bare 400).
    try {
      tally.report(noHostRequest, violations(noHostRequest, noHostAnswer, { allow: [200] }), noHostAnswer);
    } catch (e) {
      if (!(e instanceof Violation)) throw e;
    }

    // One refused quote must not fail the quotes written in the same batch.
    // Quotes are written in batches (src/store/batched-calls.ts): a burst of 40 with a bad one every 8 shares batches.
    const burst = await Promise.all(
      Array.from({ length: 41 }, (_, i) =>
        send({
          method: 'POST',
          path: '/quotes',
          headers: jsonHeaders(),
          body: Buffer.from(i % 8 === 4 ? autodj('\u0000') : JSON.stringify(validQuotes[0])),
        }),
      ),
    );
    const good = burst.filter((_, i) => i % 8 !== 4);
    for (const g of good)
      account({ method: 'POST', path: `${PREFIX}/quotes`, auth: `Bearer ${service.apiKey}`, key: undefined }, g);
    const failed = good.filter((g) => g.status !== 200);
    tally.statuses.set(`valid quotes next to a bad one: ${good.length - failed.length}×200, ${failed.length}×other`, 1);
    if (failed.length) {
      const kind = `${failed.length} of ${good.length} valid quotes sent in a burst with 5 bad ones failed: ${[...new Set(failed.map((f) => `${f.status} ${f.json?.error?.code}`))].join(', ')}`;
      tally.found.set(kind, { count: failed.length, example: failed[0].text.slice(0, 200) });
    }

    console.log(`[fuzz] regressions: ${cases.length + 2} pinned inputs; statuses ${format(tally.statuses)}`);
    for (const [kind, { count, example }] of tally.found)
      console.log(`[fuzz]   violation ×${count}: ${kind}\n[fuzz]     smallest: ${example}`);
    if (tally.found.size)
      assert.fail(
        `regressions:\n${[...tally.found].map(([k, v]) => `${k} (×${v.count}) e.g. ${v.example}`).join('\n')}`,
      );
  });

  // ---------------------------------------------------------------------------------------------------------------
  // After the fuzzing: nothing that was refused left a trace, and the service still works

  test('rejected requests changed nothing; the service is healthy', async () => {
    assert.equal(service.process.exitCode, null, 'the service is still running');

    // Keys used by refused requests are still free: an order with one asks for payment, a quote with one is new.
    const orderKeys = [...ledger.rejectedOrderKeys].filter((k) => !ledger.okOrderKeys.has(k)).slice(0, 150);
    for (const key of orderKeys) {
      const got = await send({
        method: 'POST',
        path: '/orders',
        headers: jsonHeaders([['Idempotency-Key', key]]),
        body: Buffer.from(JSON.stringify(validOrders[2])),
      });
      assert.equal(
        got.status,
        402,
        `Idempotency-Key ${JSON.stringify(key)} of a refused order is bound: ${got.status} ${got.text.slice(0, 300)}`,
      );
      assert.equal(got.json.error.code, 'payment_required');
    }
    const quoteKeys = [...ledger.rejectedQuoteKeys].filter((k) => !ledger.okQuoteKeys.has(k)).slice(0, 150);
    for (const key of quoteKeys) {
      const got = await send({
        method: 'POST',
        path: '/quotes',
        headers: jsonHeaders([['Idempotency-Key', key]]),
        body: Buffer.from(JSON.stringify(validQuotes[2])),
      });
      assert.equal(
        got.status,
        200,
        `Idempotency-Key ${JSON.stringify(key)} of a refused quote is bound: ${got.status} ${got.text.slice(0, 300)}`,
      );
      assert.equal(
        got.json.idempotency.replayed,
        false,
        `Idempotency-Key ${JSON.stringify(key)} of a refused quote already had a quote`,
      );
      ledger.quoteIds.add(got.json.quote.id);
    }

    const now = await counts();
    const grown = {
      quotes: now.quotes - baseline.quotes,
      auditQuote: now.auditQuote - baseline.auditQuote,
      orders: now.orders - baseline.orders,
      auditOrder: now.auditOrder - baseline.auditOrder,
      services: now.services - baseline.services,
      auditOther: now.auditOther - baseline.auditOther,
    };
    console.log(
      `[fuzz] state: ${ledger.quoteIds.size} quotes and ${ledger.orderIds.size} orders accepted (200); grew by ${JSON.stringify(grown)}; replayed ${orderKeys.length} order keys and ${quoteKeys.length} quote keys of refused requests`,
    );
    assert.deepEqual(
      grown,
      {
        quotes: ledger.quoteIds.size,
        auditQuote: ledger.quoteIds.size,
        orders: ledger.orderIds.size,
        auditOrder: ledger.orderIds.size,
        services: ledger.orderIds.size,
        auditOther: 0,
      },
      'quotes, orders, services and audit records grew exactly by the accepted (200) answers',
    );

    const verify = await service.cli(['audit', 'verify']);
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);

    const documents = await discoveryDocuments();
    for (const [path, text] of discoveryBefore)
      assert.equal(documents.get(path), text, `${path} changed during the fuzz run`);

    const health = await send({ method: 'GET', path: '/health' });
    assert.equal(health.status, 200);
    assert.equal(health.json.status, 'ok');
    const quote = await send({
      method: 'POST',
      path: '/quotes',
      headers: jsonHeaders(),
      body: Buffer.from(JSON.stringify(validQuotes[0])),
    });
    assert.equal(quote.status, 200, quote.text);
    assert.equal(quote.json.quote.price.amount_atomic, '290000');
    const missing = await send({
      method: 'POST',
      path: '/quotes',
      headers: jsonHeaders(),
      body: Buffer.from('{"product_id":"instant-stream","parameters":{"duration_hours":2,"max_listeners":10}}'),
    });
    assert.equal(missing.status, 422, 'a required parameter is still required (no prototype pollution)');
    assert.deepEqual(
      missing.json.error.details.map((d: { pointer: string }) => d.pointer),
      ['/parameters/bitrate_kbps'],
    );
    const order = await send({
      method: 'POST',
      path: '/orders',
      headers: jsonHeaders([['Idempotency-Key', `${RUN}-final`]]),
      body: Buffer.from(JSON.stringify(validOrders[0])),
    });
    assert.equal(order.status, 402, order.text);
    assert.ok(order.headers['payment-required']);
  });
});

/** Keeps the ledger: what 200 answers created (judged by the answer, whatever route matched), and which keys refused requests used. */
function account(
  request: { method: string; path: string; auth: string | undefined; key: string | undefined },
  got: Answer,
): void {
  if (request.method !== 'POST') return;
  if (got.status === 200 && typeof got.json?.quote?.id === 'string' && !got.json.idempotency?.replayed)
    ledger.quoteIds.add(got.json.quote.id);
  if (got.status === 200 && typeof got.json?.order?.id === 'string' && !got.json.idempotent_replay) {
    ledger.orderIds.add(got.json.order.id);
    ledger.serviceIds.add(got.json.service?.service_id);
  }
  const key = request.key;
  if (key === undefined || !IDEMPOTENCY_KEY.test(key)) return;
  const quotes = request.path === `${PREFIX}/quotes`;
  const orders = request.path === `${PREFIX}/orders`;
  if (got.status === 200) {
    if (quotes) ledger.okQuoteKeys.add(key);
    if (orders) ledger.okOrderKeys.add(key);
    return;
  }
  // A key refused because it is bound already, or busy, says nothing about the refused request.
  if (!authorizationValid(request.auth) || /^idempotency_/.test(got.json?.error?.code ?? '')) return;
  if (quotes) ledger.rejectedQuoteKeys.add(key);
  if (orders) ledger.rejectedOrderKeys.add(key);
}

function decodeURIComponentSafe(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
