/**
 * The pool manager: serves ADD/DEL/CHECK/GC/STATUS from the node state, grows pools
 * single-flight when an ADD finds nothing free, and runs the warm loop (targets, hysteresis
 * on release, cooldown expiry). Giving the surplus back to EC2 is in ipam/pool_shrink.ts; the
 * leaked-ENI collector and the re-syncs are in ipam/ec2_sync.ts and ipam/imds_check.ts.
 *
 * @module
 */
import type { IpamAddRequest, IpamResponse, PodAllocation } from "../proto/ipam.ts";
import { ErrorCode } from "../cni/errors.ts";
import { cloudErrorCode } from "./cloud.ts";
import { defaultPoolName, type PoolConfig, type SubnetChoice, subnetChoice } from "./config.ts";
import type { AllocationRecord } from "./checkpoint.ts";
import { addEni } from "./eni_lifecycle.ts";
import {
  assignToExisting,
  candidateSubnets,
  type ExhaustReason,
  type GrowthContext,
  perEniCapacity,
  PoolExhausted,
} from "./growth.ts";
import { attachmentKey, warmShortfall } from "./node_state.ts";
import { ANNOTATION_SUBNET_SELECTOR, choosePool } from "./pool_choice.ts";
import { releaseSurplus } from "./pool_shrink.ts";
import { subnetGateway } from "./subnets.ts";
import { log } from "./log.ts";

/** Live state of one pool besides its addresses. */
export interface PoolRuntime {
  cfg: PoolConfig;
  choice: SubnetChoice;
  securityGroupIds: string[];
  growing?: Promise<void>;
  exhausted?: { reason: ExhaustReason; since: number; detail: string };
  surplusSince?: number;
  waitingAdds: number;
  waiters: Set<() => void>;
  /** No warm-loop growth before this (backoff after EC2 failures). */
  nextGrowAt: number;
  growFailures: number;
  /** Times of recent ADDs (ms), for the arrival rate. */
  addTimes: number[];
  /** Smoothed time to create, attach and fill one ENI (ms); 0 until one was measured. */
  eniLatencyMs: number;
}

const RATE_WINDOW_MS = 10_000;

/**
 * A DEL or GC released addresses in memory but the checkpoint could not be written: the
 * release holds (the address is no pod's any more), and the disk shows it held until the next
 * write that succeeds. Answered with code 5.
 */
export class CheckpointWriteError extends Error {
  /** `what` says what was changed in memory. */
  constructor(what: string, stateDir: string, cause: unknown) {
    super(
      `${what}, but writing the checkpoint in ${stateDir} failed: ${(cause as Error).message}`,
      { cause },
    );
    this.name = "CheckpointWriteError";
  }
}

/** Everything the manager needs besides the growth context. */
export interface PoolManagerOptions {
  ctx: GrowthContext;
  securityGroups: Map<string, string[]>;
  vpcCidrs: string[];
  nodeIps: string[];
  /** MACs of the node's ENIs as IMDS listed them at start (foreign ones included). */
  nodeEniMacs?: string[];
  save: () => Promise<void>;
}

/** Serves the protocol's operations over the pools. */
export class PoolManager {
  readonly pools = new Map<string, PoolRuntime>();
  readonly ctx: GrowthContext;
  readonly #o: PoolManagerOptions;
  readonly #inflight = new Map<string, Promise<IpamResponse>>();
  /** In-flight ADDs a DEL for the same attachment arrived for. */
  readonly #cancelled = new Set<string>();

  /** Builds the runtime of every configured pool. */
  constructor(o: PoolManagerOptions) {
    this.#o = o;
    this.ctx = o.ctx;
    for (const p of o.ctx.cfg.pools) {
      this.pools.set(p.name, {
        cfg: p,
        choice: subnetChoice(p),
        securityGroupIds: o.securityGroups.get(p.name) ?? [],
        waitingAdds: 0,
        waiters: new Set(),
        nextGrowAt: 0,
        growFailures: 0,
        addTimes: [],
        eniLatencyMs: 0,
      });
    }
    o.ctx.onGrew = () => {
      for (const rt of this.pools.values()) this.#notify(rt);
    };
  }

  /**
   * Which `vpcni.io/<pool>` devices a pod holds, when the daemon talks to the kubelet
   * (ipam/kubelet/); undefined (or an undefined answer) leaves the choice to annotations.
   */
  poolsOfPod?: (namespace: string, name: string) => Promise<string[] | undefined>;

  /**
   * Picks the pool for an ADD from the pod's devices (`resourcePools`) and annotations; an
   * error response when it cannot.
   */
  resolvePool(
    annotations: Record<string, string> | undefined,
    resourcePools?: string[],
  ): PoolRuntime | IpamResponse {
    return choosePool(annotations, this.pools, this.ctx, resourcePools);
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
    const existing = this.ctx.state.allocations.get(key);
    if (existing || this.#inflight.has(key)) {
      const pool = existing?.pool ?? "";
      this.ctx.metrics.adds.inc({ pool, result: "duplicate" });
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
    if (req.annotations?.[ANNOTATION_SUBNET_SELECTOR] !== undefined) {
      await this.ctx.ensureSubnetsDescribed?.();
    }
    let resourcePools: string[] | undefined;
    try {
      resourcePools = this.poolsOfPod && req.podNamespace && req.podName
        ? await this.poolsOfPod(req.podNamespace, req.podName)
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
    const start = performance.now();
    rt.addTimes.push(this.ctx.now());
    if (rt.addTimes.length > 256) rt.addTimes.shift();
    const deadline = this.ctx.now() + this.ctx.cfg.addTimeoutSeconds * 1000;
    let waited = false;
    let grewOnce = false;
    const key = attachmentKey(req);
    try {
      for (;;) {
        if (this.#cancelled.delete(key)) {
          // The runtime gave up on this ADD and already sent DEL: do not hold an address.
          return { ok: false, code: 11, msg: `ADD of ${req.containerId} was cancelled by a DEL` };
        }
        const rec = this.ctx.state.take(pool, this.ctx.now(), {
          network: req.network,
          containerId: req.containerId,
          ifName: req.ifName,
          podNamespace: req.podNamespace,
          podName: req.podName,
          podUid: req.podUid,
          netns: req.netns,
        });
        if (rec) {
          const unsaved = await this.#saveOrUndo(key, rec);
          if (unsaved) return unsaved;
          const secs = (performance.now() - start) / 1000;
          this.ctx.metrics.addWait.observe({ pool }, waited ? secs : 0);
          this.ctx.metrics.adds.inc({ pool, result: waited ? "waited" : "fast" });
          this.#kickWarm(rt);
          return { ok: true, allocation: this.podAllocation(rec) };
        }
        if (!waited) rt.waitingAdds++;
        waited = true;
        const now = this.ctx.now();
        if (now >= deadline) break;
        const cooldownEnd = this.ctx.state.nextCooldownEnd(pool, now);
        // Once a growth attempt made for this ADD ended in exhaustion, waiting is pointless
        // unless a cooling address comes back before the deadline.
        if (
          grewOnce && rt.exhausted && !rt.growing &&
          (cooldownEnd === undefined || cooldownEnd > deadline)
        ) break;
        // An exhausted pool is not asked again in a loop: wait for a cooling address or a
        // release instead (the warm loop re-tests growth on its own period).
        const growth = grewOnce && rt.exhausted && !rt.growing
          ? undefined
          : this.grow(rt).then(() => {
            grewOnce = true;
          });
        await this.#waitChange(rt, Math.min(deadline, cooldownEnd ?? deadline) - now, growth);
      }
    } finally {
      if (waited) rt.waitingAdds--;
      this.#cancelled.delete(key);
    }
    this.ctx.metrics.adds.inc({ pool, result: "no_ip" });
    const why = rt.exhausted
      ? `${rt.exhausted.reason}: ${rt.exhausted.detail}`
      : `pool did not grow within ${this.ctx.cfg.addTimeoutSeconds} s`;
    log.warn("ADD {containerId} got no address from pool {pool}: {why}", {
      containerId: req.containerId,
      pool,
      why,
    });
    return { ok: false, code: 11, msg: `no free address in pool ${pool}`, details: why };
  }

  /**
   * Writes the checkpoint after `take`. When the write fails the take is undone (the address
   * is free again, as it still is on disk) and the ADD gets code 5: answering success for an
   * allocation the disk does not hold would let a restart hand the address out twice.
   */
  async #saveOrUndo(key: string, rec: AllocationRecord): Promise<IpamResponse | undefined> {
    try {
      await this.#o.save();
      return undefined;
    } catch (e) {
      // Only this attachment's own record is dropped: a DEL that came meanwhile already did.
      if (this.ctx.state.allocations.get(key) === rec) {
        this.ctx.state.release(key, this.ctx.now(), 0);
        this.#notify(this.pools.get(rec.pool)!);
      }
      const stateDir = this.ctx.cfg.stateDir;
      log.error("ADD {containerId} not served: the checkpoint could not be written: {error}", {
        containerId: rec.containerId,
        ip: rec.ip,
        stateDir,
        error: String(e),
      });
      return {
        ok: false,
        code: ErrorCode.IO_FAILURE,
        msg: `could not record ${rec.ip} for container ${rec.containerId} interface ` +
          `${rec.ifName}: writing the checkpoint in ${stateDir} failed: ${(e as Error).message}`,
        details: `${rec.ip} was not handed out and is free again; the daemon needs ${stateDir} ` +
          "writable (is the disk full or read-only?)",
      };
    }
  }

  #waitChange(rt: PoolRuntime, ms: number, growth: Promise<void> | undefined): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        rt.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(1, ms));
      rt.waiters.add(done);
      growth?.then(done, done);
    });
  }

  #notify(rt: PoolRuntime) {
    for (const w of [...rt.waiters]) w();
  }

  /** DEL: releases the attachment's address into cooldown (unknown attachments: nothing). */
  async del(key: string): Promise<PodAllocation[]> {
    if (this.#inflight.has(key)) {
      this.#cancelled.add(key);
      const rt = this.pools.get(this.ctx.state.allocations.get(key)?.pool ?? "");
      for (const r of rt ? [rt] : this.pools.values()) this.#notify(r);
    }
    const a = this.#release(key);
    if (a) await this.#saveReleases(`DEL released ${a.ip}`);
    return a ? [this.podAllocation(a)] : [];
  }

  #release(key: string): AllocationRecord | undefined {
    const a = this.ctx.state.allocations.get(key);
    if (!a) return undefined;
    const rt = this.pools.get(a.pool);
    const cooldownMs = (rt?.cfg.ipCooldownSeconds ?? 30) * 1000;
    this.ctx.state.release(key, this.ctx.now(), cooldownMs);
    this.ctx.metrics.dels.inc({ pool: a.pool });
    if (rt && cooldownMs === 0) this.#notify(rt);
    return a;
  }

  /** The attachments of `network` not in `valid`: what GC would release (nothing is). */
  stale(network: string, valid: { containerId: string; ifName: string }[]): PodAllocation[] {
    const keep = new Set(valid.map((v) => attachmentKey({ network, ...v })));
    return [...this.ctx.state.allocations].filter(([key, a]) =>
      a.network === network && !keep.has(key)
    ).map(([, a]) => this.podAllocation(a));
  }

  /** MACs of every ENI on the node: those IMDS listed at start and those managed now. */
  nodeEniMacs(): string[] {
    const macs = new Set((this.#o.nodeEniMacs ?? []).map((m) => m.toLowerCase()));
    for (const e of this.ctx.state.enis.values()) if (e.mac) macs.add(e.mac.toLowerCase());
    return [...macs].sort();
  }

  /** GC: releases every attachment of `network` not in `valid`. */
  async gc(network: string, valid: { containerId: string; ifName: string }[]) {
    const keep = new Set(valid.map((v) => attachmentKey({ network, ...v })));
    const released: PodAllocation[] = [];
    for (const [key, a] of [...this.ctx.state.allocations]) {
      if (a.network !== network || keep.has(key)) continue;
      const r = this.#release(key);
      if (r) released.push(this.podAllocation(r));
    }
    if (released.length > 0) {
      await this.#saveReleases(`GC released ${released.map((r) => r.ip).join(", ")}`);
    }
    return released;
  }

  /** Writes the checkpoint after releases; a failed write is a {@linkcode CheckpointWriteError}. */
  async #saveReleases(what: string): Promise<void> {
    try {
      await this.#o.save();
    } catch (e) {
      throw new CheckpointWriteError(what, this.ctx.cfg.stateDir, e);
    }
  }

  /** The protocol's view of an allocation. */
  podAllocation(a: AllocationRecord): PodAllocation {
    const eni = this.ctx.state.enis.get(a.eniId);
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
        routeTable: this.ctx.cfg.routeTableBase + eni.deviceIndex,
        ...(eni.primaryIp ? { primaryIp: eni.primaryIp } : {}),
      },
      vpcCidrs: this.#o.vpcCidrs,
      nodeIps: this.#o.nodeIps,
      nodeEniMacs: this.nodeEniMacs(),
    };
  }

  /**
   * Free addresses the pool should hold so that ADDs arriving at the current rate do not
   * wait while one more ENI is created and attached: rate × measured ENI latency.
   */
  demandFree(rt: PoolRuntime): number {
    const now = this.ctx.now();
    while (rt.addTimes.length && now - rt.addTimes[0] > RATE_WINDOW_MS) rt.addTimes.shift();
    if (rt.addTimes.length < 3 || rt.eniLatencyMs === 0) return 0;
    const span = Math.max(1000, now - rt.addTimes[0]);
    const perMs = rt.addTimes.length / span;
    return Math.ceil(perMs * rt.eniLatencyMs * 1.2);
  }

  /** Warm arithmetic of a pool now, demand included. */
  shortfallOf(rt: PoolRuntime) {
    const s = this.ctx.state.stats(rt.cfg.name, this.ctx.now());
    return {
      s,
      ...warmShortfall(rt.cfg, s, perEniCapacity(rt.cfg, this.ctx), this.demandFree(rt)),
    };
  }

  /** Starts growth of a pool unless it is already growing; resolves when that run ends. */
  grow(rt: PoolRuntime): Promise<void> {
    if (rt.growing) return rt.growing;
    rt.growing = this.#grow(rt).finally(() => {
      rt.growing = undefined;
      this.#notify(rt);
    });
    return rt.growing;
  }

  async #grow(rt: PoolRuntime): Promise<void> {
    const pool = rt.cfg;
    const per = perEniCapacity(pool, this.ctx);
    try {
      for (let round = 0; round < this.ctx.maxEnis + 1; round++) {
        const { s, shortfall } = this.shortfallOf(rt);
        const need = Math.max(shortfall, rt.waitingAdds - s.free);
        if (need <= 0) break;
        const got = await assignToExisting(this.ctx, pool, need);
        if (got >= need) continue;
        // Several ENIs at once when one is not enough: each takes seconds to attach.
        const left = need - got;
        let count = Math.ceil(left / per);
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
              addEni(this.ctx, pool, rt.choice, rt.securityGroupIds, Math.min(per, left - i * per)),
          ),
        );
        const ok = results.filter((r) => r.status === "fulfilled").length;
        if (ok > 0) {
          const took = this.ctx.now() - started;
          rt.eniLatencyMs = rt.eniLatencyMs === 0 ? took : 0.7 * rt.eniLatencyMs + 0.3 * took;
        }
        const failed = results.find((r) => r.status === "rejected") as
          | PromiseRejectedResult
          | undefined;
        if (failed && (ok === 0 || failed.reason instanceof PoolExhausted)) throw failed.reason;
      }
      this.#clearExhausted(rt);
      rt.growFailures = 0;
    } catch (e) {
      if (e instanceof PoolExhausted) {
        this.#setExhausted(rt, e.reason, e.message);
        return;
      }
      const code = cloudErrorCode(e) ?? "Unknown";
      this.ctx.metrics.growFailures.inc({ pool: pool.name, code });
      rt.growFailures++;
      rt.nextGrowAt = this.ctx.now() + Math.min(30_000, 500 * 2 ** rt.growFailures);
      log.warn("pool {pool} failed to grow: {code} {error}", {
        pool: pool.name,
        code,
        error: (e as Error).message,
      });
    }
  }

  #setExhausted(rt: PoolRuntime, reason: ExhaustReason, detail: string) {
    if (rt.exhausted?.reason !== reason) {
      this.ctx.metrics.exhaustedTotal.inc({ pool: rt.cfg.name, reason });
      log.warn("pool {pool} cannot grow: {reason}: {detail}", {
        pool: rt.cfg.name,
        reason,
        detail,
        condition: reason,
      });
    }
    rt.exhausted = { reason, since: this.ctx.now(), detail };
  }

  #clearExhausted(rt: PoolRuntime) {
    if (rt.exhausted) log.info("pool {pool} can grow again", { pool: rt.cfg.name });
    rt.exhausted = undefined;
  }

  /** After the warm loop released an ENI of `rt`, whose slot any pool may take again. */
  #eniReleased(rt: PoolRuntime) {
    this.#clearExhausted(rt);
    for (const other of this.pools.values()) {
      if (other.exhausted?.reason === "eni_limit") this.#clearExhausted(other);
    }
  }

  #kickWarm(rt: PoolRuntime) {
    const { shortfall } = this.shortfallOf(rt);
    if (shortfall > 0 && !rt.growing && !rt.exhausted && this.ctx.now() >= rt.nextGrowAt) {
      void this.grow(rt);
    }
  }

  /** One step of the warm loop: expire cooldowns, grow short pools, shrink long ones. */
  async tick(): Promise<void> {
    const now = this.ctx.now();
    if (this.ctx.state.expireCooldowns(now)) await this.#o.save();
    for (const rt of this.pools.values()) {
      const { shortfall, surplus } = this.shortfallOf(rt);
      if (shortfall > 0 && !rt.growing && now >= rt.nextGrowAt) {
        // Exhaustion is re-tested each tick: a freed ENI slot or subnet room ends it. Not
        // awaited, so pools grow side by side.
        void this.grow(rt);
      }
      if (surplus > 0 && !rt.growing) {
        rt.surplusSince ??= now;
        if (now - rt.surplusSince >= this.ctx.cfg.releaseDelaySeconds * 1000) {
          await releaseSurplus(this.ctx, rt.cfg, surplus, () => this.#eniReleased(rt)).catch((e) =>
            log.warn("pool {pool} failed to release surplus: {error}", {
              pool: rt.cfg.name,
              error: String(e),
            })
          );
          rt.surplusSince = undefined;
        }
      } else {
        rt.surplusSince = undefined;
      }
    }
  }

  /** STATUS of a pool. */
  status(poolName?: string): IpamResponse {
    const rt = this.pools.get(poolName ?? defaultPoolName(this.ctx.cfg));
    if (!rt) return { ok: false, code: 7, msg: `no pool named "${poolName}"` };
    const s = this.ctx.state.stats(rt.cfg.name, this.ctx.now());
    const canGrow = !rt.exhausted && candidateSubnets(this.ctx, rt.choice).length > 0;
    return { ok: true, pool: rt.cfg.name, available: s.free, canGrow };
  }
}
