/**
 * The allocator: the only writer of who holds which address. It takes a free address for an
 * attachment, releases it into its pool's cooldown, expires cooldowns, lets go of addresses
 * the host stopped routing, and writes the checkpoint after each change — undoing a take whose
 * write failed, so the disk and memory never disagree about an address handed out.
 *
 * @module
 */
import type { IpamResponse } from "../proto/ipam.ts";
import { ErrorCode } from "../cni/errors.ts";
import type { AllocationRecord } from "./checkpoint.ts";
import type { DaemonConfig } from "./config.ts";
import type { DaemonMetrics } from "./metrics.ts";
import type { NodeState, PoolStats } from "./node_state.ts";
import { log } from "./log.ts";

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

/** Who an address is taken for: an allocation without what the allocator fills in. */
export type Attachment = Omit<AllocationRecord, "ip" | "eniId" | "pool" | "time">;

/** What the allocator is built from. */
export interface AllocatorOptions {
  cfg: Pick<DaemonConfig, "stateDir" | "pools">;
  state: NodeState;
  metrics: Pick<DaemonMetrics, "dels">;
  now: () => number;
  /** Writes the checkpoint of `state` (atomically); throws when it cannot. */
  save: () => Promise<void>;
  /** Called when addresses of `pool` became free at once (an ADD waiting may take one). */
  onFreed: (pool: string) => void;
}

/** Takes and releases addresses, and keeps the checkpoint in step. */
export class Allocator {
  readonly #o: AllocatorOptions;

  /** Builds the allocator over the node's state. */
  constructor(o: AllocatorOptions) {
    this.#o = o;
  }

  /** The allocation of an attachment key, if it holds one. */
  allocation(key: string): Readonly<AllocationRecord> | undefined {
    return this.#o.state.allocations.get(key);
  }

  /** Every allocation, by attachment key. */
  allocations(): ReadonlyMap<string, Readonly<AllocationRecord>> {
    return this.#o.state.allocations;
  }

  /** Counts of a pool now. */
  stats(pool: string): PoolStats {
    return this.#o.state.stats(pool, this.#o.now());
  }

  /** The earliest end of a cooldown in `pool` still to come, if any. */
  nextCooldownEnd(pool: string): number | undefined {
    return this.#o.state.nextCooldownEnd(pool, this.#o.now());
  }

  /** Takes a free address of `pool` for `who` (packing the lowest ENIs first); not yet saved. */
  take(pool: string, who: Attachment): AllocationRecord | undefined {
    return this.#o.state.take(pool, this.#o.now(), who);
  }

  /**
   * Writes the checkpoint after `take`. When the write fails the take is undone (the address
   * is free again, as it still is on disk) and the ADD gets code 5: answering success for an
   * allocation the disk does not hold would let a restart hand the address out twice.
   */
  async commit(key: string, rec: AllocationRecord): Promise<IpamResponse | undefined> {
    try {
      await this.#o.save();
      return undefined;
    } catch (e) {
      // Only this attachment's own record is dropped: a DEL that came meanwhile already did.
      if (this.#o.state.allocations.get(key) === rec) {
        this.#o.state.release(key, this.#o.now(), 0);
        this.#o.onFreed(rec.pool);
      }
      const stateDir = this.#o.cfg.stateDir;
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

  /** Releases an attachment's address into its pool's cooldown; not yet saved. */
  release(key: string): AllocationRecord | undefined {
    const a = this.#o.state.allocations.get(key);
    if (!a) return undefined;
    const cooldownMs = this.#cooldownMs(a.pool);
    this.#o.state.release(key, this.#o.now(), cooldownMs);
    this.#o.metrics.dels.inc({ pool: a.pool });
    if (cooldownMs === 0) this.#o.onFreed(a.pool);
    return a;
  }

  /** Writes the checkpoint after releases; a failed write is a {@linkcode CheckpointWriteError}. */
  async saveReleases(what: string): Promise<void> {
    try {
      await this.#o.save();
    } catch (e) {
      throw new CheckpointWriteError(what, this.#o.cfg.stateDir, e);
    }
  }

  /** Drops expired cooldowns, writing the checkpoint when any went. */
  async expireCooldowns(): Promise<void> {
    if (this.#o.state.expireCooldowns(this.#o.now())) await this.#o.save();
  }

  /**
   * Lets go of the routed-unknown addresses the host no longer routes (`routed`): each cools
   * down like a released address. Saves and tells waiting ADDs when any went.
   */
  async releaseUnrouted(routed: Set<string>): Promise<boolean> {
    const state = this.#o.state;
    const cooldown = (ip: string) => this.#cooldownMs(state.ownerOf(ip)?.pool);
    if (!state.releaseUnrouted(routed, this.#o.now(), cooldown)) return false;
    await this.#o.save();
    for (const p of this.#o.cfg.pools) this.#o.onFreed(p.name);
    return true;
  }

  #cooldownMs(pool: string | undefined): number {
    return (this.#o.cfg.pools.find((p) => p.name === pool)?.ipCooldownSeconds ?? 30) * 1000;
  }
}
