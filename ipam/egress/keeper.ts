/**
 * Keeps the node's egress ruleset (ipam/egress/plan.ts) true from the daemon: at start, and
 * again on every IMDS check and EC2 re-sync, it computes the plan from the configuration,
 * IMDS's facts and the pools' ENIs, and applies it (a no-op when the kernel already agrees).
 * A failure is logged and retried on the next pass; it never stops the daemon.
 *
 * @module
 */
import type { DaemonConfig } from "../config.ts";
import { poolSnat, subnetChoice } from "../config.ts";
import type { SubnetInfo } from "../cloud.ts";
import type { ManagedEni } from "../node_state.ts";
import { matchSubnets } from "../subnets.ts";
import { log } from "../log.ts";
import { NetlinkSocket } from "../../netlink/socket.ts";
import { findLinkByMac } from "../../netlink/link.ts";
import { type EgressEni, type EgressFacts, planEgress, RT_TABLE_MAIN } from "./plan.ts";
import { applyEgress } from "./apply.ts";

/** What the keeper reads each pass. */
export interface EgressSources {
  cfg: DaemonConfig;
  /** The primary ENI (IMDS): its first address is the node's. */
  primary: { mac: string; localIpv4s: string[]; subnetId: string };
  vpcCidrs: string[];
  az: string;
  /** The subnets the daemon knows (kept current by the subnet cache). */
  subnets: SubnetInfo[];
  /** The ENIs the pools hold now. */
  enis: () => Iterable<ManagedEni>;
  /** Where to program (a netns path); the daemon's own netns when absent. */
  netnsPath?: string;
}

/** The facts of the plan, from the daemon's view of the node. */
export function egressFacts(src: EgressSources): EgressFacts {
  const { cfg } = src;
  const enis = [...src.enis()];
  using rt = src.netnsPath ? NetlinkSocket.openIn(src.netnsPath) : NetlinkSocket.open();
  const ifindexOf = (mac: string) => findLinkByMac(rt, mac)?.index;
  const attached: EgressEni[] = [{
    deviceIndex: 0,
    ifindex: ifindexOf(src.primary.mac),
    table: RT_TABLE_MAIN,
  }];
  for (const e of enis) {
    if (e.deviceIndex === 0) continue;
    attached.push({
      deviceIndex: e.deviceIndex,
      ifindex: ifindexOf(e.mac),
      table: cfg.routeTableBase + e.deviceIndex,
    });
  }
  const pools = cfg.pools.map((p) => {
    const matched = matchSubnets(subnetChoice(p), src.subnets, {
      az: src.az,
      primarySubnetId: src.primary.subnetId,
    }).map((s) => s.cidr);
    const held = enis.filter((e) => e.pool === p.name).map((e) => e.subnetCidr);
    return {
      name: p.name,
      snat: poolSnat(cfg, p),
      excludeCidrs: p.snatExcludeCidrs,
      randomFully: p.snatRandomFully,
      sourceCidrs: [...new Set([...matched, ...held])],
    };
  });
  return { nodeIp: src.primary.localIpv4s[0], vpcCidrs: src.vpcCidrs, enis: attached, pools };
}

/** Applies the plan on each {@linkcode EgressKeeper.sync}. */
export class EgressKeeper {
  #src: EgressSources;
  #lastError?: string;

  /** A keeper over `src` (nothing is applied until the first sync). */
  constructor(src: EgressSources) {
    this.#src = src;
  }

  /**
   * Makes the kernel match the plan; logs what it changed, or why it could not. Where a pool
   * SNATs but the primary ENI's link is not in this netns, this is not the node's network and
   * nothing is programmed.
   */
  sync(): void {
    try {
      const facts = egressFacts(this.#src);
      const plan = planEgress(facts);
      const primaryLink = facts.enis.find((e) => e.deviceIndex === 0)?.ifindex;
      if (plan.chains.length > 0 && primaryLink === undefined) {
        throw new Error(
          `the primary ENI (${this.#src.primary.mac}) has no link in this network namespace: ` +
            "not the node's network, nothing programmed",
        );
      }
      const r = applyEgress(plan, this.#src.netnsPath);
      const { missing, stray } = r.diff;
      if (missing.length || stray.length) {
        log.info("egress ruleset corrected: {changes}", {
          changes: [...missing.map((m) => `added ${m}`), ...stray.map((s) => `removed ${s}`)]
            .join("; "),
        });
      }
      this.#lastError = undefined;
    } catch (e) {
      const error = (e as Error).message;
      if (error !== this.#lastError) {
        log.error("cannot program the egress ruleset (SNAT, connection marks): {error}", {
          error,
        });
      }
      this.#lastError = error;
    }
  }
}
