import type { Context } from 'koa';
import type { CapacityReserve } from '../catalog/index.js';
import { ApiError } from '../errors/index.js';
import type { CheckoutStatus } from '../operations/discovery-documents.js';
import { newcomerLimits } from '../orders/index.js';
import type { StreamLoad } from '../services/index.js';

/** One live streaming host as /availability reads it: what it carries, and what is in use and spoken for on it. */
export interface HostRoom {
  limits: StreamLoad;
  load: StreamLoad;
}

/**
 * What /availability reads of the stream capacity: the live hosts in the order placement tries them. A new stream
 * goes to the first host it fits on, and one host holds a whole stream: what is free on the pool as a whole says
 * little about what one order can get.
 */
export interface CapacityView {
  read(): Promise<{ hosts: HostRoom[] }>;
}

interface ProductAvailability {
  product_id: string;
  agent_orderable: boolean;
  available_now: boolean;
  newcomer_available_now?: boolean;
  limits?: { listeners?: { minimum?: number; maximum?: number } };
  reason: string;
}

/**
 * GET /availability as true as the pool's capacity, and worked out as placement works: a product is available_now
 * only when a live host has a stream slot and the listener places for the asked shape (`?listeners=N`, else the
 * product's smallest), and newcomer_available_now only when the host the order would be placed on (the first that
 * fits) keeps it within the newcomers' part of that host, which is what the claim checks. Counted at most a second
 * ago. The catalog's part of the document (built once per snapshot) is patched, not rebuilt.
 */
export function availabilityAnswer(
  capacity: CapacityView | undefined,
  reserveOf: () => CapacityReserve | undefined,
  checkout?: () => CheckoutStatus,
) {
  let recent: { at: number; load: ReturnType<CapacityView['read']> } | undefined;
  const load = () => {
    if (!recent || Date.now() - recent.at > 1000) {
      const next = { at: Date.now(), load: capacity!.read() };
      next.load.catch(() => {
        if (recent === next) recent = undefined;
      });
      recent = next;
    }
    return recent.load;
  };
  return async (ctx: Context, document: Buffer): Promise<void> => {
    const asked = askedListeners(ctx.query.listeners);
    ctx.set('Content-Type', 'application/json; charset=utf-8');
    if (!capacity) {
      ctx.body = checkout ? withCheckout(JSON.parse(document.toString()), checkout()) : document;
      return;
    }
    ctx.set('Cache-Control', 'no-store');
    const { hosts } = await load();
    const reserve = reserveOf();
    const body = JSON.parse(document.toString()) as AvailabilityDocument;
    if (checkout) withCheckout(body, checkout());
    body.capacity = { ...capacityDocument(hosts, reserve), ...(asked !== undefined && { asked_listeners: asked }) };
    for (const product of body.products) {
      if (!product.agent_orderable) continue;
      const listeners = asked ?? product.limits?.listeners?.minimum ?? 1;
      const placed = placeFor(product, hosts, listeners);
      if (placed.refusal) {
        product.available_now = false;
        product.reason =
          `${placed.refusal} Nothing can be bought that would not fit; retry later (places come free as streams` +
          ' expire), or ask for fewer listeners.';
      }
      if (reserve) markNewcomers(product, placed.host && newcomerFree(placed.host, reserve), listeners);
    }
    ctx.body = body;
  };
}

type AvailabilityDocument = { products: ProductAvailability[]; agent_checkout?: CheckoutStatus } & Record<
  string,
  unknown
>;

/**
 * Machine payment as it is now (the document is built once per catalog snapshot): while no facilitator can take a
 * payment, checkout is unavailable and so is every product, saying why.
 */
function withCheckout(body: AvailabilityDocument, checkout: CheckoutStatus): AvailabilityDocument {
  const { reason: _reason, ...was } = body.agent_checkout ?? ({} as Partial<CheckoutStatus>);
  body.agent_checkout = { ...was, ...checkout } as CheckoutStatus;
  if (!checkout.available && checkout.configured) {
    for (const product of body.products) {
      if (!product.available_now) continue;
      product.available_now = false;
      product.reason =
        `Machine payment is unavailable now (${checkout.reason ?? 'no facilitator can take a payment'}); ` +
        `nothing can be paid until it is back. Retry in a minute.`;
    }
  }
  return body;
}

/** A size and what is free of it, as the document shows them. */
function roomDocument(size: StreamLoad, free: StreamLoad) {
  return {
    stream_slots: { total: size.sources, free: free.sources },
    listener_places: { total: size.listeners, free: free.listeners },
  };
}

const NONE: StreamLoad = { sources: 0, listeners: 0 };
const plus = (a: StreamLoad, b: StreamLoad): StreamLoad => ({
  sources: a.sources + b.sources,
  listeners: a.listeners + b.listeners,
});

/** The pool summed, each host in placement's order, and with a reserve the newcomers' part of each. */
function capacityDocument(hosts: HostRoom[], reserve: CapacityReserve | undefined) {
  const each = hosts.map((h) => ({
    size: h.limits,
    free: freeOf(h.limits, h.load),
    newcomers: reserve && { size: newcomerLimits(h.limits, reserve), free: newcomerFree(h, reserve) },
  }));
  const summed = (pick: (e: (typeof each)[number]) => StreamLoad) => each.map(pick).reduce(plus, NONE);
  return {
    ...roomDocument(
      summed((e) => e.size),
      summed((e) => e.free),
    ),
    ...(reserve && {
      newcomers: roomDocument(
        summed((e) => e.newcomers!.size),
        summed((e) => e.newcomers!.free),
      ),
    }),
    hosts: each.map((e) => ({
      ...roomDocument(e.size, e.free),
      ...(e.newcomers && { newcomers: roomDocument(e.newcomers.size, e.newcomers.free) }),
    })),
  };
}

function freeOf(limits: StreamLoad, used: StreamLoad): StreamLoad {
  return {
    sources: Math.max(0, limits.sources - used.sources),
    listeners: Math.max(0, limits.listeners - used.listeners),
  };
}

/** What a wallet without paid history may still fill of this host (agent_checkout.capacity_reserve). */
function newcomerFree(host: HostRoom, reserve: CapacityReserve): StreamLoad {
  return freeOf(newcomerLimits(host.limits, reserve), host.load);
}

/** The host an order for the product would be placed on now (the first that fits), or why there is none. */
function placeFor(
  product: ProductAvailability,
  hosts: HostRoom[],
  listeners: number,
): { host?: HostRoom; refusal?: string } {
  const maximum = product.limits?.listeners?.maximum;
  if (maximum !== undefined && listeners > maximum)
    return { refusal: `${product.product_id} takes at most ${maximum} listeners.` };
  const host = hosts.find((h) => roomOn(freeOf(h.limits, h.load), listeners) === undefined);
  return host ? { host } : { refusal: noHostFor(hosts, listeners) };
}

/** Whether a wallet without paid history could buy it too: the rest of each host is kept for established payers. */
function markNewcomers(product: ProductAvailability, free: StreamLoad | undefined, listeners: number): void {
  const room = product.available_now && free ? roomOn(free, listeners) : undefined;
  product.newcomer_available_now = product.available_now && free !== undefined && room === undefined;
  if (room) {
    product.reason =
      `${product.reason} Only for established payers now: the rest of the host it would stream on is kept for` +
      ` wallets with paid history (agent_checkout.capacity_reserve), and in the part newcomers may fill` +
      ` (capacity.hosts[].newcomers): ${room}`;
  }
}

/** Why one host's free room cannot take a stream of this many listeners, or undefined when it can. */
function roomOn(free: StreamLoad, listeners: number): string | undefined {
  if (free.sources < 1) return 'Every stream slot of this host is taken.';
  if (free.listeners < listeners)
    return `This host has ${free.listeners} listener places free, fewer than the ${listeners} asked.`;
  return undefined;
}

/** Why no live host can take the stream: in a single host's words when there is one. */
function noHostFor(hosts: HostRoom[], listeners: number): string {
  if (hosts.length === 0) return 'No streaming host is up.';
  if (hosts.length === 1) return roomOn(freeOf(hosts[0].limits, hosts[0].load), listeners)!;
  const withSlot = hosts.map((h) => freeOf(h.limits, h.load)).filter((f) => f.sources > 0);
  if (!withSlot.length) return `Every stream slot of the ${hosts.length} live streaming hosts is taken.`;
  const most = Math.max(...withSlot.map((f) => f.listeners));
  return (
    `No streaming host has the ${listeners} listener places asked free (at most ${most} on one host; ` +
    'one host serves a whole stream).'
  );
}
function askedListeners(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (typeof value !== 'string' || !/^[0-9]{1,6}$/.test(value) || !(n >= 1)) {
    throw new ApiError(
      400,
      'invalid_query',
      'listeners must be a whole number of listener places, 1 or more, e.g. /availability?listeners=20.',
    );
  }
  return n;
}
