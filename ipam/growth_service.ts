/**
 * The growth service: the only part of the daemon that asks EC2 for addresses, prefixes and
 * ENIs, or gives them back. It owns the growth context (ipam/growth.ts: the node's limits,
 * subnets, creations in flight) and each pool's growth record (in flight, exhausted, backoff
 * after failures, measured ENI latency). Growth is single-flight per pool and sized by the
 * `need` function it is built with; others learn of new addresses from its `grew` event and
 * of a finished run from `settled`.
 *
 * EC2's request limits are the account's: when EC2 throttles a pool's growth, its requests
 * are scarce for the whole fleet, so for {@linkcode ACCOUNT_BUSY_MS} after it the pool makes
 * new ENIs only for pods that wait now (their ADDs drive growth at once) and its warm target
 * waits a longer backoff, once the pool holds an address (before, the node's readiness, CNI
 * STATUS, waits on its growth). Addresses on existing ENIs are still asked for the whole need:
 * that is one call whatever the count. A node that is never throttled never sees the
 * difference.
 *
 * @module
 */
import { THROTTLE_CODES } from "../aws/retry.ts";
import { cloudErrorCode } from "./cloud.ts";
import type { PoolConfig, SubnetChoice } from "./config.ts";
import { addEni } from "./eni_lifecycle.ts";
import {
  assignToExisting,
  candidateSubnets,
  type ExhaustReason,
  type GrowthContext,
  perEniCapacity,
  PoolExhausted,
} from "./growth.ts";
import { releaseSurplus } from "./pool_shrink.ts";
import { log } from "./log.ts";

/**
 * After EC2 throttled a pool's growth, for this long new ENIs are made only for waiting pods:
 * each one costs the account three mutating calls (create, attach, modify).
 */
export const ACCOUNT_BUSY_MS = 120_000;

/**
 * The warm target's backoff after failures stops growing here; after a throttle, at the
 * second, once the pool holds an address (before, the node's readiness waits on it).
 */
const BACKOFF_CAP_MS = 30_000;
const THROTTLED_BACKOFF_CAP_MS = 120_000;

/** What the daemon knows of a pool that does not change while it runs. */
export interface PoolSpec {
  cfg: PoolConfig;
  choice: SubnetChoice;
  securityGroupIds: string[];
}

/** Why a pool cannot grow, since when. */
export interface Exhaustion {
  reason: ExhaustReason;
  since: number;
  detail: string;
}

/** A pool's growth as others may read it. */
export interface GrowthStatus {
  /** A growth run is in flight. */
  growing: boolean;
  exhausted?: Readonly<Exhaustion>;
  /** No warm-loop growth before this (backoff after EC2 failures). */
  nextGrowAt: number;
  /** Smoothed time to create, attach and fill one ENI (ms); 0 until one was measured. */
  eniLatencyMs: number;
}

interface PoolGrowth {
  spec: PoolSpec;
  growing?: Promise<void>;
  exhausted?: Exhaustion;
  nextGrowAt: number;
  growFailures: number;
  eniLatencyMs: number;
  /** When EC2 last throttled this pool's growth (epoch ms). */
  throttledAt: number;
}

/** An event with listeners; emitting calls each in the order they listened. */
export class Signal<T = void> {
  readonly #listeners = new Set<(v: T) => void>();
  /** Calls `fn` on every emit until the returned function is called. */
  listen(fn: (v: T) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }
  /** Calls every listener with `v`. */
  emit(v: T): void {
    for (const fn of [...this.#listeners]) fn(v);
  }
}

/** What the growth service is built from. */
export interface GrowthServiceOptions {
  /** The growth context without its `onGrew`, which the service sets to emit `grew`. */
  ctx: Omit<GrowthContext, "onGrew">;
  pools: Iterable<PoolSpec>;
  /** Addresses `pool` still needs now (warm target, demand and waiting ADDs); read each round. */
  need: (pool: string) => number;
  /** Addresses the ADDs waiting on `pool` now lack (beyond its free ones). */
  waiting: (pool: string) => number;
}

/** Grows and shrinks pools through EC2. */
export class GrowthService {
  /** The growth context (ipam/ec2_sync.ts and ipam/imds_check.ts read and repair it too). */
  readonly ctx: GrowthContext;
  /** Emitted whenever addresses were added to any pool. */
  readonly grew = new Signal();
  /** Emitted with the pool's name when a growth run of it ended, however it ended. */
  readonly settled = new Signal<string>();
  readonly #pools = new Map<string, PoolGrowth>();
  readonly #need: (pool: string) => number;
  readonly #waiting: (pool: string) => number;

  /** Builds the service; nothing is asked of EC2 until a pool grows. */
  constructor(o: GrowthServiceOptions) {
    this.ctx = { ...o.ctx, onGrew: () => this.grew.emit() };
    this.#need = o.need;
    this.#waiting = o.waiting;
    for (const spec of o.pools) {
      this.#pools.set(spec.cfg.name, {
        spec,
        nextGrowAt: 0,
        growFailures: 0,
        eniLatencyMs: 0,
        throttledAt: -Infinity,
      });
    }
  }

  /** The growth of a pool as it stands. */
  status(pool: string): GrowthStatus {
    const g = this.#get(pool);
    return {
      growing: g.growing !== undefined,
      exhausted: g.exhausted,
      nextGrowAt: g.nextGrowAt,
      eniLatencyMs: g.eniLatencyMs,
    };
  }

  /** Resolves once every growth run in flight now has ended, grown or not (starts none). */
  async runsEnded(): Promise<void> {
    await Promise.allSettled([...this.#pools.values()].map((g) => g.growing));
  }

  /** Whether an ADD may still hope for growth: not exhausted, a subnet with room to go to. */
  canGrow(pool: string): boolean {
    const g = this.#get(pool);
    return !g.exhausted && candidateSubnets(this.ctx, g.spec.choice).length > 0;
  }

  /** The number of addresses one ENI of this pool holds when full. */
  perEni(pool: string): number {
    return perEniCapacity(this.#get(pool).spec.cfg, this.ctx);
  }

  /** Starts growth of a pool unless it is already growing; resolves when that run ends. */
  grow(pool: string): Promise<void> {
    const g = this.#get(pool);
    if (g.growing) return g.growing;
    g.growing = this.#grow(g).finally(() => {
      g.growing = undefined;
      this.settled.emit(pool);
    });
    return g.growing;
  }

  async #grow(g: PoolGrowth): Promise<void> {
    const { cfg: pool, choice, securityGroupIds } = g.spec;
    const per = perEniCapacity(pool, this.ctx);
    try {
      for (let round = 0; round < this.ctx.maxEnis + 1; round++) {
        const need = this.#need(pool.name);
        if (need <= 0) break;
        const got = await assignToExisting(this.ctx, pool, need);
        if (got >= need) continue;
        // Several ENIs at once when one is not enough: each takes seconds to attach.
        const left = need - got;
        let count = Math.ceil(left / per);
        if (this.ctx.now() - g.throttledAt < ACCOUNT_BUSY_MS) {
          // The account is busy: ENIs for the pods waiting now, each filled in its create call.
          const waiting = this.#waiting(pool.name);
          if (waiting <= 0) break;
          count = Math.min(count, Math.ceil(waiting / per));
        }
        if (pool.maxEnis !== undefined) {
          count = Math.min(
            count,
            Math.max(1, pool.maxEnis - this.ctx.state.poolEnis(pool.name).length),
          );
        }
        const started = this.ctx.now();
        const results = await Promise.allSettled(
          Array.from(
            { length: count },
            (_, i) =>
              addEni(this.ctx, pool, choice, securityGroupIds, Math.min(per, left - i * per)),
          ),
        );
        const ok = results.filter((r) => r.status === "fulfilled").length;
        if (ok > 0) {
          const took = this.ctx.now() - started;
          g.eniLatencyMs = g.eniLatencyMs === 0 ? took : 0.7 * g.eniLatencyMs + 0.3 * took;
        }
        const failed = results.find((r) => r.status === "rejected") as
          | PromiseRejectedResult
          | undefined;
        if (failed && THROTTLE_CODES.has(cloudErrorCode(failed.reason) ?? "")) {
          g.throttledAt = this.ctx.now();
        }
        if (failed && (ok === 0 || failed.reason instanceof PoolExhausted)) throw failed.reason;
      }
      this.#clearExhausted(g);
      g.growFailures = 0;
    } catch (e) {
      if (e instanceof PoolExhausted) {
        this.#setExhausted(g, e.reason, e.message);
        return;
      }
      const code = cloudErrorCode(e) ?? "Unknown";
      this.ctx.metrics.growFailures.inc({ pool: pool.name, code });
      g.growFailures++;
      const throttled = THROTTLE_CODES.has(code);
      if (throttled) g.throttledAt = this.ctx.now();
      // A pool holding no address keeps the node not ready (CNI STATUS): no long backoff.
      const holds = this.ctx.state.stats(pool.name, this.ctx.now()).total > 0;
      g.nextGrowAt = this.ctx.now() +
        Math.min(
          throttled && holds ? THROTTLED_BACKOFF_CAP_MS : BACKOFF_CAP_MS,
          500 * 2 ** g.growFailures,
        );
      log.warn("pool {pool} failed to grow: {code} {error}", {
        pool: pool.name,
        code,
        error: (e as Error).message,
      });
    }
  }

  /**
   * Gives up to `surplus` free addresses of `pool` back to EC2 (ipam/pool_shrink.ts). Each ENI
   * released ends an exhaustion of the pool, and an ENI-limit one of every pool.
   */
  releaseSurplus(pool: string, surplus: number): Promise<void> {
    const g = this.#get(pool);
    return releaseSurplus(this.ctx, g.spec.cfg, surplus, () => {
      this.#clearExhausted(g);
      for (const other of this.#pools.values()) {
        if (other.exhausted?.reason === "eni_limit") this.#clearExhausted(other);
      }
    });
  }

  #setExhausted(g: PoolGrowth, reason: ExhaustReason, detail: string) {
    const pool = g.spec.cfg.name;
    if (g.exhausted?.reason !== reason) {
      this.ctx.metrics.exhaustedTotal.inc({ pool, reason });
      log.warn("pool {pool} cannot grow: {reason}: {detail}", {
        pool,
        reason,
        detail,
        condition: reason,
      });
    }
    g.exhausted = { reason, since: this.ctx.now(), detail };
  }

  #clearExhausted(g: PoolGrowth) {
    if (g.exhausted) log.info("pool {pool} can grow again", { pool: g.spec.cfg.name });
    g.exhausted = undefined;
  }

  #get(pool: string): PoolGrowth {
    const g = this.#pools.get(pool);
    if (!g) throw new Error(`no pool named ${pool}`);
    return g;
  }
}
