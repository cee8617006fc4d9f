/**
 * The daemon's in-memory model of the node: managed ENIs and their addresses, pod
 * allocations and cooldowns, with the pool arithmetic on top. Everything here is
 * synchronous, so an address is marked taken in the same turn it is found free: two
 * concurrent ADDs can never get the same one.
 *
 * @module
 */
import type { AllocationRecord, Checkpoint, CooldownRecord } from "./checkpoint.ts";
import { CHECKPOINT_VERSION } from "./checkpoint.ts";
import type { PoolConfig } from "./config.ts";

/** An ENI the daemon manages for one pool. */
export interface ManagedEni {
  id: string;
  mac: string;
  deviceIndex: number;
  subnetId: string;
  subnetCidr: string;
  pool: string;
  /** Device index 0: never detached; its primary address belongs to the node. */
  primary: boolean;
  /** The ENI's own primary private address (never handed to a pod); empty if EC2 showed none. */
  primaryIp: string;
  attachmentId?: string;
  /** Addresses pods may get (secondary IPs, or every address of the delegated prefixes). */
  ips: Set<string>;
  /** Delegated /28 prefixes (prefix-delegation pools). */
  prefixes: string[];
  /** Set when EC2 refused more addresses on this ENI. */
  full?: boolean;
  /**
   * Set while the ENI's detach is being asked for: it stays in the state (its device index
   * taken, its addresses EC2's) until EC2 accepted the detach, but is no pool's any more.
   */
  releasing?: boolean;
}

/** Sizes of one pool at one instant. */
export interface PoolStats {
  enis: number;
  /** Addresses held (assigned to the pool's ENIs). */
  total: number;
  /** Held by pods. */
  used: number;
  /** Released recently, not yet reusable. */
  cooling: number;
  /** Ready for an ADD now. */
  free: number;
}

/** The key CNI uses for one attachment. */
export function attachmentKey(a: { network: string; containerId: string; ifName: string }) {
  return `${a.network}/${a.containerId}/${a.ifName}`;
}

/** The node's ENIs, allocations and cooldowns. */
export class NodeState {
  /** Managed ENIs by id. */
  readonly enis = new Map<string, ManagedEni>();
  /** Allocations by attachment key. */
  readonly allocations = new Map<string, AllocationRecord>();
  /** Which attachment holds an address. */
  readonly holder = new Map<string, string>();
  /** Addresses in cooldown. */
  readonly cooldowns = new Map<string, CooldownRecord>();
  /**
   * Addresses the host still routes to a pod that no allocation names (a lost checkpoint):
   * not free until the pod's rule goes. Derived from the kernel, so not checkpointed.
   */
  readonly routedUnknown = new Set<string>();

  /** Builds an empty model for one instance. */
  constructor(readonly instanceId: string) {}

  /** ENIs of one pool, by device index; one being released is no pool's. */
  poolEnis(pool: string): ManagedEni[] {
    return [...this.enis.values()].filter((e) => e.pool === pool && !e.releasing)
      .sort((a, b) => a.deviceIndex - b.deviceIndex);
  }

  /** Whether an address is free for an ADD at `now`. */
  isFree(ip: string, now: number): boolean {
    if (this.holder.has(ip) || this.routedUnknown.has(ip)) return false;
    const c = this.cooldowns.get(ip);
    return c === undefined || c.until <= now;
  }

  /** Counts of a pool at `now`. */
  stats(pool: string, now: number): PoolStats {
    const s: PoolStats = { enis: 0, total: 0, used: 0, cooling: 0, free: 0 };
    for (const e of this.poolEnis(pool)) {
      s.enis++;
      for (const ip of e.ips) {
        s.total++;
        if (this.holder.has(ip) || this.routedUnknown.has(ip)) s.used++;
        else if (!this.isFree(ip, now)) s.cooling++;
        else s.free++;
      }
    }
    return s;
  }

  /**
   * Takes a free address of `pool` and records the allocation, in one synchronous step.
   * Packs pods onto the lowest ENIs first, so the highest ones empty out and can go.
   */
  take(
    pool: string,
    now: number,
    rec: Omit<AllocationRecord, "ip" | "eniId" | "pool" | "time">,
  ): AllocationRecord | undefined {
    for (const e of this.poolEnis(pool)) {
      for (const ip of e.ips) {
        if (!this.isFree(ip, now)) continue;
        this.cooldowns.delete(ip);
        const a: AllocationRecord = { ...rec, ip, eniId: e.id, pool, time: now };
        const key = attachmentKey(a);
        this.allocations.set(key, a);
        this.holder.set(ip, key);
        return a;
      }
    }
    return undefined;
  }

  /** Releases an attachment's address into cooldown; returns the released record. */
  release(key: string, now: number, cooldownMs: number): AllocationRecord | undefined {
    const a = this.allocations.get(key);
    if (!a) return undefined;
    this.allocations.delete(key);
    this.holder.delete(a.ip);
    if (cooldownMs > 0) {
      this.cooldowns.set(a.ip, { ip: a.ip, eniId: a.eniId, until: now + cooldownMs });
    }
    return a;
  }

  /**
   * Lets go of routed-unknown addresses whose pod rule is gone (`routed` is what the host
   * routes now): each cools down like a released address. True if any went.
   */
  releaseUnrouted(routed: Set<string>, now: number, cooldownMs: (ip: string) => number): boolean {
    let changed = false;
    for (const ip of this.routedUnknown) {
      if (routed.has(ip)) continue;
      this.routedUnknown.delete(ip);
      changed = true;
      const owner = this.ownerOf(ip);
      const ms = cooldownMs(ip);
      if (owner && ms > 0) this.cooldowns.set(ip, { ip, eniId: owner.id, until: now + ms });
    }
    return changed;
  }

  /** Drops expired cooldowns and those of addresses no longer held; true if any went. */
  expireCooldowns(now: number): boolean {
    let changed = false;
    for (const [ip, c] of this.cooldowns) {
      if (c.until <= now || !this.ownerOf(ip)) {
        this.cooldowns.delete(ip);
        changed = true;
      }
    }
    return changed;
  }

  /** The earliest cooldown end of a pool after `now`, if any. */
  nextCooldownEnd(pool: string, now: number): number | undefined {
    let min: number | undefined;
    for (const c of this.cooldowns.values()) {
      const e = this.enis.get(c.eniId);
      if (e?.pool !== pool || c.until <= now || this.holder.has(c.ip)) continue;
      if (min === undefined || c.until < min) min = c.until;
    }
    return min;
  }

  /** The managed ENI that holds an address. */
  ownerOf(ip: string): ManagedEni | undefined {
    for (const e of this.enis.values()) if (e.ips.has(ip)) return e;
    return undefined;
  }

  /** Device indexes in use or reserved. */
  usedDeviceIndexes(extra: Iterable<number> = []): Set<number> {
    return new Set([...[...this.enis.values()].map((e) => e.deviceIndex), ...extra]);
  }

  /** The checkpoint document for this state. */
  toCheckpoint(now: number): Checkpoint {
    return {
      version: CHECKPOINT_VERSION,
      instanceId: this.instanceId,
      savedAt: now,
      allocations: [...this.allocations.values()],
      cooldowns: [...this.cooldowns.values()].filter((c) => c.until > now),
      routedUnknown: [...this.routedUnknown].sort(),
      enis: [...this.enis.values()].filter((e) => !e.primary && !e.releasing).map((e) => ({
        id: e.id,
        pool: e.pool,
        deviceIndex: e.deviceIndex,
        ...(e.attachmentId ? { attachmentId: e.attachmentId } : {}),
      })),
    };
  }
}

/** Addresses one ENI of a pool can hold beyond its own primary address. */
export function ipsPerEni(p: PoolConfig, ipv4PerEni: number): number {
  return p.prefixDelegation ? (ipv4PerEni - 1) * 16 : ipv4PerEni - 1;
}

/**
 * How many free addresses a pool wants and how many it holds too many, from its warm
 * targets: free ≥ max(warmIps, warmEnis × perEni, demandFree), total ≥ minimumIps, where
 * `demandFree` is what the current ADD rate will take while one ENI is being added. Cooling addresses
 * are held but not free, so they raise the target; they are never surplus.
 */
export function warmShortfall(
  p: PoolConfig,
  s: PoolStats,
  perEni: number,
  demandFree = 0,
): { wantFree: number; shortfall: number; surplus: number } {
  const wantFree = Math.max(p.warmIps, p.warmEnis * perEni, demandFree);
  const wantTotal = Math.max(p.minimumIps, s.used + s.cooling + wantFree);
  const shortfall = Math.max(0, wantTotal - s.total);
  // Hysteresis: growth asks for a whole warm batch, so only what lies beyond one more batch
  // counts as surplus. ENI-sized pools give back whole idle ENIs only (see ipam/pool_shrink.ts), so
  // they need no band here.
  const band = p.warmEnis > 0 ? 0 : p.warmIps;
  const surplus = Math.max(0, s.total - wantTotal - band);
  return { wantFree, shortfall, surplus: Math.min(surplus, s.free) };
}
