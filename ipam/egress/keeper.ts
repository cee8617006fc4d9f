/**
 * Keeps the node's egress ruleset (ipam/egress/plan.ts) true from the daemon. A full
 * {@linkcode EgressKeeper.sync} (at start, on every IMDS check and EC2 re-sync) computes the plan
 * from the configuration, IMDS's facts and the pools' ENIs, reads the kernel's ruleset back and
 * applies what differs. {@linkcode EgressKeeper.update}, cheap enough for every warm-loop pass
 * and every new ENI, does the same only when those facts changed (an ENI attached or gone, its
 * link come up): so an ENI's marks are in place as soon as its link is. A failure is logged and
 * retried on the next pass; it never stops the daemon.
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
import { listLinks } from "../../netlink/link.ts";
import { formatMac, parseMac } from "../../netlink/ip.ts";
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
  const links = new Map(listLinks(rt).map((l) => [l.mac, l.index]));
  const ifindexOf = (mac: string) => links.get(formatMac(parseMac(mac)));
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

/**
 * How long the daemon waits for the link of an ENI just attached before it gives up for this
 * pass (the datapath waits as long for a link, cni/datapath/host.ts).
 */
export const EGRESS_LINK_WAIT_MS = 5000;

/** What a sync or update left in the kernel. */
export interface EgressOutcome {
  /** The kernel holds the plan (false: why not was logged; the next pass tries again). */
  applied: boolean;
  /**
   * ENIs (ids) the pools hold whose link is not in this netns yet, while pools SNAT: the
   * connection marks and mark rule of each wait for its link.
   */
  waiting: string[];
}

/** Applies the plan on each {@linkcode EgressKeeper.sync}. */
export class EgressKeeper {
  #src: EgressSources;
  #lastError?: string;
  /** The facts of the last plan the kernel took (JSON), while nothing says it changed. */
  #appliedFacts?: string;
  #last: EgressOutcome = { applied: false, waiting: [] };
  /** ENIs (ids) whose marks the last plan applied holds, while pools SNAT. */
  #marked?: Set<string>;
  /** The update loop of {@linkcode settle} while one runs (one at a time is enough). */
  #settling?: Promise<EgressOutcome>;

  /** A keeper over `src` (nothing is applied until the first sync). */
  constructor(src: EgressSources) {
    this.#src = src;
  }

  /**
   * Makes the kernel match the plan; logs what it changed, or why it could not. Where a pool
   * SNATs but the primary ENI's link is not in this netns, this is not the node's network and
   * nothing is programmed.
   */
  sync(): EgressOutcome {
    return this.#apply(true);
  }

  /**
   * Applies the plan when its facts differ from those of the last plan applied (an ENI
   * attached, gone, or its link come up since); otherwise only reads the node's links.
   */
  update(): EgressOutcome {
    return this.#apply(false);
  }

  /**
   * Updates until no ENI's marks wait for its link, or `timeoutMs` passed (the link of an ENI
   * just attached appears moments after the attachment completes); the last outcome.
   */
  settle(timeoutMs: number, stepMs = 100): Promise<EgressOutcome> {
    const first = this.update();
    if (first.waiting.length === 0 || timeoutMs <= 0) return Promise.resolve(first);
    this.#settling ??= (async () => {
      const deadline = Date.now() + timeoutMs;
      let r = first;
      while (r.waiting.length > 0 && Date.now() < deadline) {
        await new Promise((done) => setTimeout(done, stepMs));
        r = this.update();
      }
      return r;
    })().finally(() => this.#settling = undefined);
    return this.#settling;
  }

  /**
   * True when nothing egress needs stands between ENI `eniId` and a pod: its marks are in, or
   * no pool SNATs (no marks at all), or the ruleset cannot be programmed here (logged).
   */
  covers(eniId: string): boolean {
    return !this.#last.applied || this.#marked === undefined || this.#marked.has(eniId);
  }

  /**
   * Resolves once ENI `eniId` has its marks (see {@linkcode covers}), waiting for its link up
   * to {@linkcode EGRESS_LINK_WAIT_MS} if it was just attached, as the datapath would.
   */
  async marksFor(eniId: string): Promise<void> {
    if (!this.covers(eniId)) await this.settle(EGRESS_LINK_WAIT_MS);
  }

  #apply(full: boolean): EgressOutcome {
    try {
      const facts = egressFacts(this.#src);
      const key = JSON.stringify(facts);
      if (!full && key === this.#appliedFacts) return this.#last;
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
      this.#appliedFacts = key;
      const waiting = plan.chains.length === 0 ? [] : this.#unlinked(facts);
      this.#marked = plan.chains.length === 0
        ? undefined
        : new Set([...this.#src.enis()].map((e) => e.id).filter((id) => !waiting.includes(id)));
      this.#last = { applied: true, waiting };
    } catch (e) {
      const error = (e as Error).message;
      if (error !== this.#lastError) {
        log.error("cannot program the egress ruleset (SNAT, connection marks): {error}", {
          error,
        });
      }
      this.#lastError = error;
      this.#appliedFacts = undefined;
      this.#last = { applied: false, waiting: [] };
    }
    return this.#last;
  }

  /** The ENIs of the pools whose link the facts did not find. */
  #unlinked(facts: EgressFacts): string[] {
    const linked = new Set(
      facts.enis.filter((e) => e.ifindex !== undefined).map((e) => e.deviceIndex),
    );
    return [...this.#src.enis()]
      .filter((e) => e.deviceIndex !== 0 && !linked.has(e.deviceIndex))
      .map((e) => e.id);
  }
}
