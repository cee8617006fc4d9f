/**
 * A read-only view of the daemon's pools for those that only report on them: introspection,
 * metrics, the unix API's CHECK, the kubelet link. Everything it returns is a copy or a
 * read-only type; changing the pools goes through the allocator, the growth service or the
 * warm loop.
 *
 * @module
 */
import type { AllocationRecord, CooldownRecord } from "./checkpoint.ts";
import type { CloudApi } from "./cloud.ts";
import type { Allocator } from "./allocator.ts";
import type { GrowthService, GrowthStatus, PoolSpec } from "./growth_service.ts";
import type { CapacityNode } from "./kubelet/capacity.ts";
import type { DaemonMetrics } from "./metrics.ts";
import type { ManagedEni, NodeState, PoolStats } from "./node_state.ts";
import type { WarmLoop, WarmNeed } from "./warm_loop.ts";

/** A managed ENI as introspection shows it: its addresses listed, how many pods hold one. */
export type EniSnapshot = Omit<ManagedEni, "ips"> & { ips: string[]; used: number };

/** What may be read of the daemon's pools. */
export interface NodeView {
  /** The daemon's metrics (filled at scrape time from this view). */
  readonly metrics: DaemonMetrics;
  /** The daemon's clock (epoch ms). */
  now(): number;
  /** The configured pools, in configuration order. */
  pools(): readonly Readonly<PoolSpec>[];
  /** A pool's warm arithmetic now (sizes, target, shortfall, surplus). */
  warm(pool: string): WarmNeed;
  /** Free addresses the recent ADD rate asks of a pool. */
  demandFree(pool: string): number;
  /** A pool's growth: in flight, exhausted, backoff, ENI latency. */
  growth(pool: string): GrowthStatus;
  /** A pool's counts now. */
  stats(pool: string): PoolStats;
  /** The allocation of an attachment key. */
  allocation(key: string): Readonly<AllocationRecord> | undefined;
  /** Every allocation. */
  allocations(): Readonly<AllocationRecord>[];
  /** Every managed ENI. */
  enis(): EniSnapshot[];
  /** Cooldowns not yet over. */
  cooldowns(): CooldownRecord[];
  /** Addresses held because the host still routes them to a pod no allocation names. */
  routedUnknown(): string[];
  /** The EC2 client's call counters. */
  callCounts(): ReturnType<CloudApi["callCounts"]>;
  /** What the kubelet's capacity arithmetic reads of the node (ipam/kubelet/capacity.ts). */
  capacityNode(): Readonly<CapacityNode>;
}

/** The parts a view reads. */
export interface NodeViewParts {
  state: NodeState;
  pools: readonly PoolSpec[];
  allocator: Allocator;
  growth: GrowthService;
  warm: WarmLoop;
}

/** Builds the read-only view over the daemon's parts. */
export function nodeView(p: NodeViewParts): NodeView {
  const { state, growth } = p;
  const now = () => growth.ctx.now();
  return {
    metrics: growth.ctx.metrics,
    now,
    pools: () => p.pools,
    warm: (pool) => p.warm.need(pool),
    demandFree: (pool) => p.warm.demandFree(pool),
    growth: (pool) => growth.status(pool),
    stats: (pool) => p.allocator.stats(pool),
    allocation: (key) => p.allocator.allocation(key),
    allocations: () => [...p.allocator.allocations().values()],
    enis: () =>
      [...state.enis.values()].map((e) => ({
        ...e,
        ips: [...e.ips],
        used: [...e.ips].filter((ip) => state.holder.has(ip)).length,
      })),
    cooldowns: () => {
      const t = now();
      return [...state.cooldowns.values()].filter((c) => c.until > t).map((c) => ({ ...c }));
    },
    routedUnknown: () => [...state.routedUnknown].sort(),
    callCounts: () => growth.ctx.cloud.callCounts(),
    capacityNode: () => growth.ctx,
  };
}
