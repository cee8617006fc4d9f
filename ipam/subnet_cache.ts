/**
 * The daemon's copy of the subnets it may use, refreshed from EC2 only when it is about to
 * matter (a new ENI's subnet is being chosen) or with the periodic EC2 re-sync.
 *
 * @module
 */
import type { SubnetInfo } from "./cloud.ts";
import { log } from "./log.ts";

/** How old the free-address counts may be when a new ENI's subnet is chosen. */
export const SUBNET_MAX_AGE_MS = 60_000;

/** Keeps one array of subnets current in place (growth holds a reference to it). */
export class SubnetCache {
  #at: number;
  #inFlight?: Promise<void>;

  /**
   * Wraps `subnets` (just described, so fresh at `now()`); `describe` fetches them again.
   */
  constructor(
    readonly subnets: SubnetInfo[],
    readonly now: () => number,
    readonly describe: () => Promise<SubnetInfo[]>,
  ) {
    this.#at = now();
  }

  /**
   * Describes the subnets again if the copy is older than `maxAgeMs`. Concurrent callers
   * share one call. A failed refresh keeps the old copy: a stale count only weights the
   * choice, and EC2 itself refuses a subnet that is full.
   */
  refresh(maxAgeMs: number): Promise<void> {
    if (this.now() - this.#at < maxAgeMs) return Promise.resolve();
    this.#inFlight ??= (async () => {
      try {
        const fresh = await this.describe();
        this.subnets.splice(0, this.subnets.length, ...fresh);
        this.#at = this.now();
      } catch (e) {
        log.warn("could not refresh subnets, keeping the last answer: {error}", {
          error: String(e),
        });
      } finally {
        this.#inFlight = undefined;
      }
    })();
    return this.#inFlight;
  }
}
