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

/**
 * Free addresses assumed for a subnet known only from IMDS: enough for any ENI's batch. If the
 * subnet is fuller than that, EC2 refuses the create, the subnet is marked full, and the next
 * refresh brings the real count.
 */
export const UNKNOWN_FREE_IPS = 4096;

/** The node's subnet as IMDS shows it, for pools that use only that one: no EC2 call. */
export function nodeSubnetFromImds(
  primary: { subnetId: string; subnetCidr: string },
  az: string,
): SubnetInfo {
  return {
    id: primary.subnetId,
    cidr: primary.subnetCidr,
    az,
    availableIps: UNKNOWN_FREE_IPS,
    tags: {},
  };
}

/** Keeps one array of subnets current in place (growth holds a reference to it). */
export class SubnetCache {
  #at: number;
  #inFlight?: Promise<void>;
  #described: boolean;

  /**
   * Wraps `subnets`, fresh at `now()`: described by EC2, or (`described` false) built from
   * IMDS, whose tags and free counts are unknown until the first refresh. `describe` fetches
   * them from EC2.
   */
  constructor(
    readonly subnets: SubnetInfo[],
    readonly now: () => number,
    readonly describe: () => Promise<SubnetInfo[]>,
    described = true,
  ) {
    this.#at = now();
    this.#described = described;
  }

  /** Describes the subnets now if EC2 has not described them yet (their tags are needed). */
  ensureDescribed(): Promise<void> {
    return this.#described ? Promise.resolve() : this.refresh(0);
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
        this.#described = true;
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
