import type { Context } from 'koa';
import type { CapacityReserve } from '../catalog/index.js';
import { ApiError } from '../errors/index.js';
import { newcomerLimits } from '../orders/index.js';
import type { StreamLoad } from '../services/index.js';

/**
 * What /availability reads of the stream capacity: the live hosts' limits and what is in use on them, summed, and
 * the room on the roomiest single host (an order must fit on one host).
 */
export interface CapacityView {
  read(): Promise<{ limits: StreamLoad; used: StreamLoad; roomiest: StreamLoad }>;
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
 * GET /availability as true as the host's capacity: a product is available_now only when the host has a stream slot
 * and the listener places for the asked shape (`?listeners=N`, else the product's smallest), counted at most a second
 * ago. The catalog's part of the document (built once per snapshot) is patched, not rebuilt.
 */
export function availabilityAnswer(capacity: CapacityView | undefined, reserveOf: () => CapacityReserve | undefined) {
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
      ctx.body = document;
      return;
    }
    ctx.set('Cache-Control', 'no-store');
    const { limits, used, roomiest } = await load();
    const free = freeOf(limits, used);
    const reserve = reserveOf();
    const newcomers = reserve && newcomerLimits(limits, reserve);
    const newcomerFree = newcomers && freeOf(newcomers, used);
    const body = JSON.parse(document.toString()) as { products: ProductAvailability[] } & Record<string, unknown>;
    body.capacity = {
      stream_slots: { total: limits.sources, free: free.sources },
      listener_places: { total: limits.listeners, free: free.listeners },
      ...(newcomers &&
        newcomerFree && {
          newcomers: {
            stream_slots: { total: newcomers.sources, free: newcomerFree.sources },
            listener_places: { total: newcomers.listeners, free: newcomerFree.listeners },
          },
        }),
      ...(asked !== undefined && { asked_listeners: asked }),
    };
    for (const product of body.products) {
      if (!product.agent_orderable) continue;
      const room = roomFor(product, roomiest, asked);
      if (room) {
        product.available_now = false;
        product.reason = `${room} Nothing can be bought that would not fit; retry later (places come free as streams expire), or ask for fewer listeners.`;
      }
      if (newcomerFree) markNewcomers(product, newcomerFree, asked);
    }
    ctx.body = body;
  };
}

function freeOf(limits: StreamLoad, used: StreamLoad): StreamLoad {
  return {
    sources: Math.max(0, limits.sources - used.sources),
    listeners: Math.max(0, limits.listeners - used.listeners),
  };
}

/** Whether a wallet without paid history could buy it too: the rest of the host is kept for established payers. */
function markNewcomers(product: ProductAvailability, free: StreamLoad, asked: number | undefined): void {
  const room = product.available_now ? roomFor(product, free, asked) : undefined;
  product.newcomer_available_now = product.available_now && room === undefined;
  if (room) {
    product.reason =
      `${product.reason} Only for established payers now: the rest of this host is kept for wallets` +
      ` with paid history (agent_checkout.capacity_reserve), and in the part newcomers may fill (capacity.newcomers):` +
      ` ${room}`;
  }
}

/** Why the host cannot take the product in the asked shape now, or undefined when it can. */
function roomFor(product: ProductAvailability, free: StreamLoad, asked: number | undefined): string | undefined {
  const range = product.limits?.listeners ?? {};
  const listeners = asked ?? range.minimum ?? 1;
  if (range.maximum !== undefined && listeners > range.maximum)
    return `${product.product_id} takes at most ${range.maximum} listeners.`;
  if (free.sources < 1) return 'Every stream slot of this host is taken.';
  if (free.listeners < listeners)
    return `This host has ${free.listeners} listener places free, fewer than the ${listeners} asked.`;
  return undefined;
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
