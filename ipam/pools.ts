/**
 * The pool manager: serves ADD/DEL/CHECK/GC/STATUS. It picks the pod's pool, takes an address
 * through the allocator (ipam/allocator.ts), and when none is free waits for the growth
 * service (ipam/growth_service.ts) to add some; the warm loop (ipam/warm_loop.ts) keeps each
 * pool at its target between requests. It owns only what requests in flight need: the ADDs
 * being served, those a DEL cancelled, and the ADDs waiting on each pool. Others read the
 * pools through `view` (ipam/node_view.ts).
 *
 * @module
 */
import type { IpamAddRequest, IpamResponse, PodAllocation } from "../proto/ipam.ts";
import { ErrorCode } from "../cni/errors.ts";
import { defaultPoolName, subnetChoice } from "./config.ts";
import type { AllocationRecord } from "./checkpoint.ts";
import type { GrowthContext } from "./growth.ts";
import { Allocator } from "./allocator.ts";
import { GrowthService, type PoolSpec } from "./growth_service.ts";
import { WarmLoop } from "./warm_loop.ts";
import { type NodeView, nodeView } from "./node_view.ts";
import { attachmentKey } from "./node_state.ts";
import { ANNOTATION_SUBNET_SELECTOR, choosePool } from "./pool_choice.ts";
import { subnetGateway } from "./subnets.ts";
import { log } from "./log.ts";

export { CheckpointWriteError } from "./allocator.ts";

/** ADDs waiting for a pool to get a free address. */
interface PoolWaiters {
  count: number;
  wake: Set<() => void>;
}

/** Everything the manager is built from. */
export interface PoolManagerOptions {
  /** The growth context without `onGrew` (the growth service emits its `grew` event). */
  ctx: Omit<GrowthContext, "onGrew">;
  securityGroups: Map<string, string[]>;
  vpcCidrs: string[];
  nodeIps: string[];
  /** MACs of the node's ENIs as IMDS listed them at start (foreign ones included). */
  nodeEniMacs?: string[];
  /** Writes the checkpoint of the node state; throws when it cannot. */
  save: () => Promise<void>;
  /**
   * Which `vpcni.io/<pool>` devices a pod holds, when the daemon talks to the kubelet
   * (ipam/kubelet/); absent (or an undefined answer) leaves the choice to annotations.
   */
  poolsOfPod?: (namespace: string, name: string) => Promise<string[] | undefined>;
  /**
   * Why no pod can start now although the pools could serve it (the kubelet link's: its
   * pod-resources API must be asked and does not answer); STATUS reports it.
   */
  podsBlocked?: () => string | undefined;
}

/** Serves the protocol's operations over the pools. */
export class PoolManager {
  /** The configured pools by name. */
  readonly pools: ReadonlyMap<string, PoolSpec>;
  /** Takes and releases addresses and writes the checkpoint. */
  readonly allocator: Allocator;
  /** Asks EC2 for addresses and gives them back. */
  readonly growth: GrowthService;
  /** Decides when pools grow and shrink. */
  readonly warm: WarmLoop;
  /** The pools, read only. */
  readonly view: NodeView;
  readonly #o: PoolManagerOptions;
  readonly #inflight = new Map<string, Promise<IpamResponse>>();
  /** In-flight ADDs a DEL for the same attachment arrived for. */
  readonly #cancelled = new Set<string>();
  /** Pools that have held an address since the start: STATUS no longer waits on them. */
  readonly #hadAddresses = new Set<string>();
  readonly #waiting = new Map<string, PoolWaiters>();

  /** Builds the pools and their owners. */
  constructor(o: PoolManagerOptions) {
    this.#o = o;
    const { ctx } = o;
    const specs = ctx.cfg.pools.map((p): PoolSpec => ({
      cfg: p,
      choice: subnetChoice(p),
      securityGroupIds: o.securityGroups.get(p.name) ?? [],
    }));
    this.pools = new Map(specs.map((s) => [s.cfg.name, s]));
    for (const s of specs) this.#waiting.set(s.cfg.name, { count: 0, wake: new Set() });
    this.allocator = new Allocator({
      cfg: ctx.cfg,
      state: ctx.state,
      metrics: ctx.metrics,
      now: ctx.now,
      save: o.save,
      onFreed: (pool) => this.#notify(pool),
    });
    this.growth = new GrowthService({
      ctx,
      pools: specs,
      // What ADDs waiting now lack counts as well as the warm target.
      need: (pool) => {
        const { s, shortfall } = this.warm.need(pool);
        return Math.max(shortfall, this.#waiters(pool).count - s.free);
      },
      waiting: (pool) => Math.max(0, this.#waiters(pool).count - this.allocator.stats(pool).free),
    });
    this.warm = new WarmLoop({
      cfg: ctx.cfg,
      pools: specs,
      allocator: this.allocator,
      growth: this.growth,
      now: ctx.now,
    });
    this.view = nodeView({
      state: ctx.state,
      pools: specs,
      allocator: this.allocator,
      growth: this.growth,
      warm: this.warm,
    });
    this.growth.grew.listen(() => {
      for (const pool of this.pools.keys()) this.#notify(pool);
    });
    this.growth.settled.listen((pool) => this.#notify(pool));
  }

  /**
   * Picks the pool for an ADD from the pod's devices (`resourcePools`) and annotations; an
   * error response when it cannot.
   */
  resolvePool(
    annotations: Record<string, string> | undefined,
    resourcePools?: string[],
  ): PoolSpec | IpamResponse {
    return choosePool(annotations, this.pools, this.growth.ctx, resourcePools);
  }

  /**
   * ADD: a new address for a new attachment; never the same address twice. An ADD for an
   * attachment that already holds an address (or is being served right now) is refused
   * with code 106 and changes nothing: the CNI spec makes a second
   * ADD without a DEL an error, and an answer handing the held address out again would let
   * the caller's rollback (its DEL) free an address a running pod still uses.
   */
  add(req: IpamAddRequest): Promise<IpamResponse> {
    const key = attachmentKey(req);
    const existing = this.allocator.allocation(key);
    if (existing || this.#inflight.has(key)) {
      const pool = existing?.pool ?? "";
      this.view.metrics.adds.inc({ pool, result: "duplicate" });
      log.warn("refused a second ADD of {containerId}/{ifName}: it already holds {ip}", {
        containerId: req.containerId,
        ifName: req.ifName,
        ip: existing?.ip ?? "an address being reserved",
      });
      return Promise.resolve({
        ok: false,
        code: ErrorCode.ATTACHMENT_EXISTS,
        msg: `container ${req.containerId} interface ${req.ifName} on network ${req.network} ` +
          `already holds ${existing?.ip ?? "an address being reserved"}`,
        details: "a second ADD without a DEL is refused and the held address is kept; " +
          "DEL the attachment first to give it a new address",
      });
    }
    const p = this.#add(req).finally(() => this.#inflight.delete(key));
    this.#inflight.set(key, p);
    return p;
  }

  async #add(req: IpamAddRequest): Promise<IpamResponse> {
    const { ctx } = this.growth;
    if (req.annotations?.[ANNOTATION_SUBNET_SELECTOR] !== undefined) {
      await ctx.ensureSubnetsDescribed?.();
    }
    let resourcePools: string[] | undefined;
    try {
      resourcePools = this.#o.poolsOfPod && req.podNamespace && req.podName
        ? await this.#o.poolsOfPod(req.podNamespace, req.podName)
        : undefined;
    } catch (e) {
      // Which pool the pod's device is of is unknown: a guess could hand it another pool's
      // address, so the runtime is asked to try again.
      return {
        ok: false,
        code: ErrorCode.TRY_AGAIN_LATER,
        msg: (e as Error).message,
        details: "the pod may hold a vpcni.io/<pool> device; the runtime retries the pod, and " +
          "'vpcni doctor' shows the kubelet link",
      };
    }
    const rt = this.resolvePool(req.annotations, resourcePools);
    if (!("cfg" in rt)) return rt;
    const pool = rt.cfg.name;
    const waiting = this.#waiters(pool);
    const start = performance.now();
    this.warm.recordAdd(pool);
    const waitMs = addWaitMs(ctx.cfg.addTimeoutSeconds, req.waitMs);
    const deadline = ctx.now() + waitMs;
    let waited = false;
    let counted = false; // among the pool's waiting ADDs, whose count sizes growth
    let grewOnce = false;
    const key = attachmentKey(req);
    try {
      for (;;) {
        if (this.#cancelled.delete(key)) {
          // The runtime gave up on this ADD and already sent DEL: do not hold an address.
          return { ok: false, code: 11, msg: `ADD of ${req.containerId} was cancelled by a DEL` };
        }
        const rec = this.allocator.take(pool, {
          network: req.network,
          containerId: req.containerId,
          ifName: req.ifName,
          podNamespace: req.podNamespace,
          podName: req.podName,
          podUid: req.podUid,
          netns: req.netns,
          ...(req.netnsHidden ? { netnsHidden: true } : {}),
        });
        if (rec) {
          // Holding an address now: no longer one growth must find an address for, even
          // while the checkpoint is written.
          if (counted) waiting.count--;
          counted = false;
          const unsaved = await this.allocator.commit(key, rec);
          if (unsaved) return unsaved;
          const secs = (performance.now() - start) / 1000;
          ctx.metrics.addWait.observe({ pool }, waited ? secs : 0);
          ctx.metrics.adds.inc({ pool, result: waited ? "waited" : "fast" });
          this.warm.kick(pool);
          return { ok: true, allocation: this.podAllocation(rec) };
        }
        if (!counted) waiting.count++;
        counted = waited = true;
        const now = ctx.now();
        if (now >= deadline) break;
        const cooldownEnd = this.allocator.nextCooldownEnd(pool);
        // Once a growth attempt made for this ADD ended in exhaustion, waiting is pointless
        // unless a cooling address comes back before the deadline.
        const g = this.growth.status(pool);
        const stuck = grewOnce && g.exhausted !== undefined && !g.growing;
        if (stuck && (cooldownEnd === undefined || cooldownEnd > deadline)) break;
        // An exhausted pool is not asked again in a loop: wait for a cooling address or a
        // release instead (the warm loop re-tests growth on its own period).
        const growth = stuck ? undefined : this.growth.grow(pool).then(() => {
          grewOnce = true;
        });
        await this.#waitChange(pool, Math.min(deadline, cooldownEnd ?? deadline) - now, growth);
      }
    } finally {
      if (counted) waiting.count--;
      this.#cancelled.delete(key);
    }
    ctx.metrics.adds.inc({ pool, result: "no_ip" });
    const exhausted = this.growth.status(pool).exhausted;
    const why = exhausted
      ? `${exhausted.reason}: ${exhausted.detail}`
      : `pool did not grow within ${waitMs / 1000} s` + (waitMs < ctx.cfg.addTimeoutSeconds * 1000
        ? ` (the plugin waits ${req.waitMs} ms for the answer: its daemonTimeoutMs)`
        : "");
    log.warn("ADD {containerId} got no address from pool {pool}: {why}", {
      containerId: req.containerId,
      pool,
      why,
    });
    return { ok: false, code: 11, msg: `no free address in pool ${pool}`, details: why };
  }

  #waitChange(pool: string, ms: number, growth: Promise<void> | undefined): Promise<void> {
    const { wake } = this.#waiters(pool);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        wake.delete(done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(1, ms));
      wake.add(done);
      growth?.then(done, done);
    });
  }

  /** Wakes the ADDs waiting on `pool`, so they try to take an address again. */
  #notify(pool: string) {
    for (const w of [...(this.#waiting.get(pool)?.wake ?? [])]) w();
  }

  #waiters(pool: string): PoolWaiters {
    return this.#waiting.get(pool)!;
  }

  /** DEL: releases the attachment's address into cooldown (unknown attachments: nothing). */
  async del(key: string): Promise<PodAllocation[]> {
    if (this.#inflight.has(key)) {
      this.#cancelled.add(key);
      const held = this.allocator.allocation(key)?.pool ?? "";
      for (const pool of this.pools.has(held) ? [held] : this.pools.keys()) this.#notify(pool);
    }
    const a = this.allocator.release(key);
    if (a) await this.allocator.saveReleases(`DEL released ${a.ip}`);
    return a ? [this.podAllocation(a)] : [];
  }

  /** Whether an ADD of the attachment is being served now. */
  busy(key: string): boolean {
    return this.#inflight.has(key);
  }

  /** CHECK: the attachment's allocation, if it holds one. */
  check(key: string): PodAllocation | undefined {
    const a = this.allocator.allocation(key);
    return a ? this.podAllocation(a) : undefined;
  }

  /** The attachments of `network` not in `valid`: what GC would release (nothing is). */
  stale(network: string, valid: { containerId: string; ifName: string }[]): PodAllocation[] {
    const keep = new Set(valid.map((v) => attachmentKey({ network, ...v })));
    return [...this.allocator.allocations()].filter(([key, a]) =>
      a.network === network && !keep.has(key)
    ).map(([, a]) => this.podAllocation(a));
  }

  /** MACs of every ENI on the node: those IMDS listed at start and those managed now. */
  nodeEniMacs(): string[] {
    const macs = new Set((this.#o.nodeEniMacs ?? []).map((m) => m.toLowerCase()));
    for (const e of this.growth.ctx.state.enis.values()) if (e.mac) macs.add(e.mac.toLowerCase());
    return [...macs].sort();
  }

  /** GC: releases every attachment of `network` not in `valid`. */
  async gc(network: string, valid: { containerId: string; ifName: string }[]) {
    const keep = new Set(valid.map((v) => attachmentKey({ network, ...v })));
    const released: PodAllocation[] = [];
    for (const [key, a] of [...this.allocator.allocations()]) {
      if (a.network !== network || keep.has(key)) continue;
      const r = this.allocator.release(key);
      if (r) released.push(this.podAllocation(r));
    }
    if (released.length > 0) {
      await this.allocator.saveReleases(`GC released ${released.map((r) => r.ip).join(", ")}`);
    }
    return released;
  }

  /** The protocol's view of an allocation. */
  podAllocation(a: Readonly<AllocationRecord>): PodAllocation {
    const { ctx } = this.growth;
    const eni = ctx.state.enis.get(a.eniId);
    if (!eni) throw new Error(`allocation ${a.ip} refers to unknown ENI ${a.eniId}`);
    return {
      network: a.network,
      containerId: a.containerId,
      ifName: a.ifName,
      ip: a.ip,
      pool: a.pool,
      eni: {
        id: eni.id,
        mac: eni.mac,
        deviceIndex: eni.deviceIndex,
        primary: eni.primary,
        subnetId: eni.subnetId,
        subnetCidr: eni.subnetCidr,
        gateway: subnetGateway(eni.subnetCidr),
        routeTable: ctx.cfg.routeTableBase + eni.deviceIndex,
        ...(eni.primaryIp ? { primaryIp: eni.primaryIp } : {}),
      },
      vpcCidrs: this.#o.vpcCidrs,
      nodeIps: this.#o.nodeIps,
      nodeEniMacs: this.nodeEniMacs(),
    };
  }

  /** One step of the warm loop (ipam/warm_loop.ts). */
  tick(): Promise<void> {
    return this.warm.tick();
  }

  /**
   * STATUS of a pool. A pool that keeps addresses warm but has not yet held one since the
   * daemon started answers code 50 while it can still grow: the runtime then reports the
   * network not ready, so the node takes no pod before it has an address to give (a fleet
   * started at once would otherwise fail its first pods' ADDs while EC2 throttles the
   * account). Once the pool has held an address, STATUS no longer waits on growth. While
   * the kubelet link says no pod can start (`podsBlocked`), STATUS answers code 50 too.
   */
  status(poolName?: string): IpamResponse {
    const rt = this.pools.get(poolName ?? defaultPoolName(this.growth.ctx.cfg));
    if (!rt) return { ok: false, code: 7, msg: `no pool named "${poolName}"` };
    const name = rt.cfg.name;
    const blocked = this.#o.podsBlocked?.();
    if (blocked) return { ok: false, code: ErrorCode.PLUGIN_NOT_AVAILABLE, msg: blocked };
    const s = this.allocator.stats(name);
    if (!this.#hadAddresses.has(name)) {
      const keepsWarm = this.warm.need(name).wantFree > 0 || rt.cfg.minimumIps > 0;
      if (s.total > 0 || !keepsWarm) this.#hadAddresses.add(name);
      else if (this.growth.canGrow(name)) {
        const g = this.growth.status(name);
        return {
          ok: false,
          code: ErrorCode.PLUGIN_NOT_AVAILABLE,
          msg: `pool ${name} has no address yet: its first addresses are being asked of EC2` +
            (g.nextGrowAt > this.growth.ctx.now() ? " (the last try failed, retrying)" : "") +
            "; the node takes pods once it has one ('vpcni doctor' shows the pool)",
        };
      }
    }
    return {
      ok: true,
      pool: name,
      available: s.free,
      canGrow: this.growth.canGrow(name),
    };
  }
}

/**
 * How long an ADD waits for an address: `addTimeoutSeconds`, cut short so that the answer
 * reaches a plugin that waits `clientWaitMs` in time, with room left for the wiring that
 * follows the reservation (a quarter of the plugin's bound, at most 2 s).
 */
export function addWaitMs(addTimeoutSeconds: number, clientWaitMs?: number): number {
  const own = addTimeoutSeconds * 1000;
  if (clientWaitMs === undefined) return own;
  return Math.max(0, Math.min(own, clientWaitMs - Math.min(2000, clientWaitMs / 4)));
}
