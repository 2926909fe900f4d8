import type { HostPlacement, PoolHost } from '../hosts/index.js';
import type { Snapshot } from '../pricing/index.js';
import type { StreamLoad } from '../services/index.js';
import type { Client, Database, Row } from '../store/index.js';
import {
  checkBuyerLimits,
  heldStatement,
  keyHoldings,
  type Buyer,
  type Holding,
  type HostLoad,
} from './buyer-limits.js';
import type { ClaimLocks } from './order-store.js';
import type { Demand } from './sale-kind.js';
import { RecentCount } from './recent-count.js';

export interface AdmissionOptions {
  db: Database;
  /** Places new streams on the pool's hosts; without it (no streaming) nothing is counted. */
  placement?: HostPlacement;
}

/**
 * Never sells a stream that does not fit on a host, nor one beyond the buyer's limits: a new stream goes to a live host
 * with room (HostPlacement), an upgrade or a revival stays on its service's host. Checked before asking for money
 * (against counts at most a second old, this instance's own sales added) and exactly when the key is claimed, under
 * the placement lock, so that two buyers of the last place anywhere cannot both pay for it.
 */
export class Admission {
  private readonly db: Database;
  private readonly placement?: HostPlacement;
  /** The pool as read at most a second ago, for the check before payment. */
  private readonly recentPool = new RecentCount<PoolHost[]>();
  /** What each API key held lately, for the buyer limits before payment (see checkBuyerBeforePayment). */
  private readonly recentKeyHoldings = new Map<string, RecentCount<Holding>>();
  /** Passed buyer-limit checks before payment, by key, payer and demand, with the counts they read. */
  private readonly recentPasses = new Map<
    string,
    { at: number; snapshot: Snapshot; held?: Promise<Holding>; host?: HostLoad; check: Promise<void> }
  >();

  constructor(options: AdmissionOptions) {
    this.db = options.db;
    this.placement = options.placement;
  }

  /** Refuses, before asking for money, a sale that does not fit on the Icecast or within the buyer's limits. */
  async beforePayment(snapshot: Snapshot, buyer: Buyer, demand: Demand): Promise<void> {
    const host = await this.admit(demand);
    await this.checkBuyerBeforePayment(snapshot, buyer, demand.load, host);
  }

  /** Whether a sale of this load is placed on a host (and checked under the placement lock at claim). */
  placesStreams(load: StreamLoad): boolean {
    return !!this.placement && (load.sources > 0 || load.listeners > 0);
  }

  /**
   * The checks before payment, again and exactly, under the locks of the claim. The payer's limit is checked here,
   * once the facilitator vouched for its payer: a forged payer must not learn what another address holds.
   */
  async atClaim(
    client: Client,
    snapshot: Snapshot,
    buyer: Buyer & { payer: string },
    demand: Demand,
    locked: ClaimLocks,
  ): Promise<{ host_id: string | null }> {
    const { host, held } = await this.admitWithHoldings(client, buyer, demand, locked);
    const check = { client, host, locked: !!locked.buyer, held };
    await checkBuyerLimits(this.db, snapshot, buyer, demand.load, check);
    return { host_id: host?.id ?? demand.ownHost ?? null };
  }

  /**
   * admit() under the claim's locks; a new stream on the pool with both locks taken reads the buyer's holdings in the
   * same statement as the pool (both after the locks: one round trip less while every claim queues on them).
   */
  private async admitWithHoldings(
    client: Client,
    buyer: Buyer & { payer: string },
    demand: Demand,
    locked: ClaimLocks,
  ): Promise<{ host?: PoolHost; held?: Row[] }> {
    const placement = this.placement;
    if (!placement || !locked.placement || !locked.buyer || demand.ownHost) {
      return { host: await this.admit(demand, client, locked.placement) };
    }
    const read = await placement.poolWith(client, heldStatement(buyer.apiKeyId, buyer.payer, 2));
    return { host: placement.choose(read.hosts, demand.load), held: read.beside };
  }

  /** The host the sale fits on, with its limits and load, for the capacity reserve. */
  private async admit(demand: Demand, client?: Client, placementLocked = false): Promise<PoolHost | undefined> {
    const placement = this.placement;
    if (!placement || !this.placesStreams(demand.load)) return undefined;
    if (client && !placementLocked) await placement.lock(client);
    if (demand.ownHost) {
      const host = await placement.host(demand.ownHost, client);
      if (host) placement.admitOn(host, demand.load);
      return host;
    }
    if (client) return placement.choose(await placement.pool(client), demand.load);
    try {
      return placement.choose(await this.recentHosts(placement), demand.load);
    } catch {
      // Never refused on a recent count (its next expiry, for Retry-After, may be older than the sales added).
      this.recentPool.forget();
      return placement.choose(await this.recentHosts(placement), demand.load);
    }
  }

  /** The pool as read at most a second ago (this instance's own claims added, see countSale). */
  private recentHosts(placement: HostPlacement): Promise<PoolHost[]> {
    return this.recentPool.get(() => placement.pool());
  }

  /**
   * The buyer limits for the key before payment is asked, on what the key held at most a second ago, on the same
   * snapshot (this instance's own sales added, see countSale; other instances' show within a second). A pass is reused
   * while those counts and the host's are the same objects; a refusal is never made on them: they are read again
   * first. The limits are checked again, exactly and under locks, when the paid order is claimed.
   */
  private checkBuyerBeforePayment(
    snapshot: Snapshot,
    buyer: Buyer,
    demand: StreamLoad,
    host?: HostLoad,
  ): Promise<void> {
    const counted = snapshot.catalog.settings.buyer_limits && (demand.sources > 0 || demand.listeners > 0);
    const held = counted ? this.recentHoldingsOf(snapshot, buyer.apiKeyId) : undefined;
    const key = `${buyer.apiKeyId}\n${buyer.payer ?? ''}\n${demand.sources}\n${demand.listeners}`;
    const recent = this.recentPasses.get(key);
    const same = recent && recent.snapshot === snapshot && recent.held === held && recent.host === host;
    if (same && Date.now() - recent.at <= 1000) return recent.check;
    if (this.recentPasses.size >= 10_000) this.recentPasses.clear();
    const check = this.checkOnRecentCounts(snapshot, buyer, demand, host, held);
    const entry = { at: Date.now(), snapshot, held, host, check };
    this.recentPasses.set(key, entry);
    check.catch(() => {
      if (this.recentPasses.get(key) === entry) this.recentPasses.delete(key);
    });
    return check;
  }

  private async checkOnRecentCounts(
    snapshot: Snapshot,
    buyer: Buyer,
    demand: StreamLoad,
    host: HostLoad | undefined,
    held: Promise<Holding> | undefined,
  ): Promise<void> {
    try {
      await checkBuyerLimits(this.db, snapshot, buyer, demand, { host, ...(held && { keyHeld: () => held }) });
    } catch {
      this.recentKeyHoldings.delete(buyer.apiKeyId);
      await checkBuyerLimits(this.db, snapshot, buyer, demand, { host });
    }
  }

  private recentHoldingsOf(snapshot: Snapshot, apiKeyId: string): Promise<Holding> {
    let recent = this.recentKeyHoldings.get(apiKeyId);
    if (!recent) {
      if (this.recentKeyHoldings.size >= 10_000) this.recentKeyHoldings.clear();
      recent = new RecentCount<Holding>();
      this.recentKeyHoldings.set(apiKeyId, recent);
    }
    return recent.get(() => keyHoldings(this.db, snapshot, apiKeyId), snapshot);
  }

  /**
   * A new stream this instance just claimed, added to the counts the next checks before payment read (at most a second
   * old): the next buyer's 402 needs no new read of the pool and of the key's holdings. An upgrade or an extension,
   * and an order not delivered, make them read afresh instead (forget).
   */
  countSale(order: { host_id?: string | null; api_key_id: string }, demand: StreamLoad): void {
    this.recentPool.add((hosts) =>
      hosts.map((h) => (h.id === order.host_id ? { ...h, load: addLoad(h.load, demand) } : h)),
    );
    this.recentKeyHoldings.get(order.api_key_id)?.add((held) => ({
      ...held,
      live_services: held.live_services + demand.sources,
      listener_places: held.listener_places + demand.listeners,
    }));
  }

  /** The counts before payment are read again: a claim was refused on them, or what was sold is not what they say. */
  forget(): void {
    this.recentPool.forget();
    this.recentKeyHoldings.clear();
    this.recentPasses.clear();
  }
}

function addLoad(load: StreamLoad, demand: StreamLoad): StreamLoad {
  return { sources: load.sources + demand.sources, listeners: load.listeners + demand.listeners };
}
