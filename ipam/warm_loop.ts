/**
 * The warm loop: decides when a pool grows and when its surplus goes back to EC2. Each pool
 * wants free ≥ max(warmIps, warmEnis × per-ENI, demand) and total ≥ minimumIps (ipam/node_state.ts
 * `warmShortfall`); demand is the recent ADD rate times the measured time to add an ENI. A
 * surplus is released only once it has lasted `releaseDelaySeconds`. The loop owns the ADD
 * times and the surplus clocks; the growth service does the EC2 work.
 *
 * @module
 */
import type { DaemonConfig } from "./config.ts";
import type { Allocator } from "./allocator.ts";
import type { GrowthService, PoolSpec } from "./growth_service.ts";
import { type PoolStats, warmShortfall } from "./node_state.ts";
import { log } from "./log.ts";

const RATE_WINDOW_MS = 10_000;

/** A pool's warm arithmetic at one instant. */
export interface WarmNeed {
  s: PoolStats;
  wantFree: number;
  shortfall: number;
  surplus: number;
}

interface PoolWarmth {
  spec: PoolSpec;
  /** Times of recent ADDs (ms), for the arrival rate. */
  addTimes: number[];
  /** Since when the pool has held more than it wants. */
  surplusSince?: number;
}

/** What the warm loop is built from. */
export interface WarmLoopOptions {
  cfg: Pick<DaemonConfig, "releaseDelaySeconds">;
  pools: Iterable<PoolSpec>;
  allocator: Pick<Allocator, "stats" | "expireCooldowns">;
  growth: Pick<GrowthService, "grow" | "releaseSurplus" | "status" | "perEni">;
  now: () => number;
}

/** Keeps each pool at its warm target. */
export class WarmLoop {
  readonly #o: WarmLoopOptions;
  readonly #pools = new Map<string, PoolWarmth>();

  /** Builds the loop; it acts only when `tick` or `kick` is called. */
  constructor(o: WarmLoopOptions) {
    this.#o = o;
    for (const spec of o.pools) this.#pools.set(spec.cfg.name, { spec, addTimes: [] });
  }

  /** Counts an ADD of `pool` towards its arrival rate. */
  recordAdd(pool: string): void {
    const w = this.#get(pool);
    w.addTimes.push(this.#o.now());
    if (w.addTimes.length > 256) w.addTimes.shift();
  }

  /**
   * Free addresses the pool should hold so that ADDs arriving at the current rate do not
   * wait while one more ENI is created and attached: rate × measured ENI latency.
   */
  demandFree(pool: string): number {
    const w = this.#get(pool);
    const now = this.#o.now();
    while (w.addTimes.length && now - w.addTimes[0] > RATE_WINDOW_MS) w.addTimes.shift();
    const latency = this.#o.growth.status(pool).eniLatencyMs;
    if (w.addTimes.length < 3 || latency === 0) return 0;
    const span = Math.max(1000, now - w.addTimes[0]);
    const perMs = w.addTimes.length / span;
    return Math.ceil(perMs * latency * 1.2);
  }

  /** Warm arithmetic of a pool now, demand included. */
  need(pool: string): WarmNeed {
    const w = this.#get(pool);
    const s = this.#o.allocator.stats(pool);
    return {
      s,
      ...warmShortfall(w.spec.cfg, s, this.#o.growth.perEni(pool), this.demandFree(pool)),
    };
  }

  /** After an ADD took an address: grows the pool at once if it fell below its target. */
  kick(pool: string): void {
    const g = this.#o.growth.status(pool);
    if (
      this.need(pool).shortfall > 0 && !g.growing && !g.exhausted && this.#o.now() >= g.nextGrowAt
    ) {
      void this.#o.growth.grow(pool);
    }
  }

  /** One step of the warm loop: expire cooldowns, grow short pools, shrink long ones. */
  async tick(): Promise<void> {
    const now = this.#o.now();
    await this.#o.allocator.expireCooldowns();
    for (const [pool, w] of this.#pools) {
      const { shortfall, surplus } = this.need(pool);
      const g = this.#o.growth.status(pool);
      if (shortfall > 0 && !g.growing && now >= g.nextGrowAt) {
        // Exhaustion is re-tested each tick: a freed ENI slot or subnet room ends it. Not
        // awaited, so pools grow side by side.
        void this.#o.growth.grow(pool);
      }
      if (surplus > 0 && !this.#o.growth.status(pool).growing) {
        w.surplusSince ??= now;
        if (now - w.surplusSince >= this.#o.cfg.releaseDelaySeconds * 1000) {
          await this.#o.growth.releaseSurplus(pool, surplus).catch((e) =>
            log.warn("pool {pool} failed to release surplus: {error}", {
              pool,
              error: String(e),
            })
          );
          w.surplusSince = undefined;
        }
      } else {
        w.surplusSince = undefined;
      }
    }
  }

  #get(pool: string): PoolWarmth {
    const w = this.#pools.get(pool);
    if (!w) throw new Error(`no pool named ${pool}`);
    return w;
  }
}
