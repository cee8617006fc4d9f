/**
 * The egress check: vpcni's SNAT and connection-mark ruleset (table `ip vpcni`, the mark
 * rules at priority 1500) against what the configuration and the node's facts call for.
 * Missing pieces and stray ones are listed; `doctor datapath --fix` puts the ruleset right
 * when the daemon is not running to do it, and removes the table when no pool SNATs any more
 * (ours, and orphaned). A table named `ip vpcni` that vpcni did not make is reported, never
 * touched.
 *
 * @module
 */
import type { CheckResult } from "./report.ts";
import type { Facts } from "./facts.ts";
import { openNftSocket } from "../netlink/nft_batch.ts";
import { findLinkByMac, NetlinkSocket } from "../netlink/mod.ts";
import {
  EGRESS_TABLE,
  type EgressFacts,
  type EgressPlan,
  planEgress,
  RT_TABLE_MAIN,
} from "../ipam/egress/plan.ts";
import { applyEgress, diffEgress, type EgressDiff, readEgress } from "../ipam/egress/apply.ts";

/** The plan doctor expects, or why it cannot tell. */
export function expectedEgress(f: Facts, hostNetns?: string): EgressPlan | string {
  const md = f.metadata;
  if (!md) return "IMDS unreachable: the node's address and the VPC's blocks are unknown";
  const primary = md.enis.find((e) => e.deviceIndex === 0);
  if (!primary) return "IMDS shows no primary ENI";
  using rt = hostNetns ? NetlinkSocket.openIn(hostNetns) : NetlinkSocket.open();
  const base = f.config.routeTableBase;
  const facts: EgressFacts = {
    nodeIp: primary.localIpv4s[0],
    vpcCidrs: md.vpcCidrs,
    enis: md.enis.filter((e) => e.deviceIndex === 0 || f.enis.some((x) => x.mac === e.mac))
      .map((e) => ({
        deviceIndex: e.deviceIndex,
        ifindex: findLinkByMac(rt, e.mac)?.index,
        table: e.deviceIndex === 0 ? RT_TABLE_MAIN : base + e.deviceIndex,
      })),
    pools: f.config.pools.map((p) => {
      const snat = (p.snat as string | undefined) ??
        (f.config.datapath === "ipvlan-l2" ? "none" : "node");
      const held = f.enis.filter((e) => e.pool === p.name).map((e) => e.subnetCidr);
      const node = p.subnets === undefined || p.subnets === "node" ? [primary.subnetCidr] : [];
      return {
        name: p.name,
        snat: snat === "node" ? "node" as const : "none" as const,
        excludeCidrs: (p.snatExcludeCidrs as string[] | undefined) ?? [],
        randomFully: (p.snatRandomFully as boolean | undefined) ?? true,
        sourceCidrs: [...new Set([...node, ...held])],
      };
    }),
  };
  const plan = planEgress(facts);
  if (plan.chains.length && facts.enis.find((e) => e.deviceIndex === 0)?.ifindex === undefined) {
    return `the primary ENI (${primary.mac}) has no link here: not the node's network`;
  }
  return plan;
}

/** The differences doctor reports (a pool's source set is judged only with the daemon up). */
export function egressFindings(f: Facts, hostNetns?: string): EgressDiff | string {
  const plan = expectedEgress(f, hostNetns);
  if (typeof plan === "string") return plan;
  using nft = openNftSocket(hostNetns);
  using rt = hostNetns ? NetlinkSocket.openIn(hostNetns) : NetlinkSocket.open();
  const k = readEgress(nft, rt);
  if (k.table && !k.ours) {
    return `a table ip ${EGRESS_TABLE} exists that vpcni did not make; not judged`;
  }
  const d = diffEgress(plan, k);
  if (f.source !== "daemon") {
    // Without the daemon, the subnets of tag- or id-selected pools and which secondary ENIs
    // are vpcni's are not known here: those parts are not judged.
    const unknown = (l: string) =>
      l.startsWith("set src-") || /entered through ENI #[1-9]/.test(l) ||
      (l.startsWith("rule 1500 ") && !l.endsWith("lookup main"));
    d.missing = d.missing.filter((l) => !unknown(l));
    d.stray = d.stray.filter((l) => !unknown(l));
  }
  return d;
}

/** The egress check. */
export function checkSnat(f: Facts, hostNetns?: string): CheckResult {
  const base = { id: "egress", title: "egress (SNAT, connection marks)" };
  let d: EgressDiff | string;
  try {
    d = egressFindings(f, hostNetns);
  } catch (e) {
    d = `cannot read the ruleset: ${(e as Error).message}`;
  }
  if (typeof d === "string") return { ...base, status: "skip", found: d };
  const snatPools = f.config.pools.filter((p) =>
    ((p.snat as string | undefined) ?? (f.config.datapath === "ipvlan-l2" ? "none" : "node")) ===
      "node"
  ).map((p) => p.name);
  if (d.missing.length === 0 && d.stray.length === 0) {
    return {
      ...base,
      status: "ok",
      found: snatPools.length
        ? `table ip ${EGRESS_TABLE} as expected; SNAT for ${snatPools.join(", ")}`
        : "no pool SNATs, and no egress ruleset is left",
    };
  }
  return {
    ...base,
    status: "fail",
    found: `${d.missing.length} missing, ${d.stray.length} stray`,
    details: [...d.missing.map((m) => `missing: ${m}`), ...d.stray.map((s) => `stray: ${s}`)],
    fix: f.daemon.reachable
      ? "the daemon puts it right on its next IMDS check (imdsCheckSeconds); restart it to do it now"
      : "vpcni doctor datapath --fix rebuilds it (or removes it when no pool SNATs)",
  };
}

/**
 * `doctor datapath --fix`'s part for egress: when the ruleset differs from the plan and no
 * daemon runs to correct it, applies the plan (which removes the table when it is ours and
 * no pool SNATs). Returns what it did, or undefined when there was nothing to do.
 */
export function fixSnat(f: Facts, hostNetns?: string): string | undefined {
  if (f.daemon.reachable) return undefined;
  const d = egressFindings(f, hostNetns);
  if (typeof d === "string" || (d.missing.length === 0 && d.stray.length === 0)) return undefined;
  const plan = expectedEgress(f, hostNetns) as EgressPlan;
  applyEgress(plan, hostNetns);
  return plan.chains.length
    ? `rebuilt table ip ${EGRESS_TABLE} (${d.missing.length} missing, ${d.stray.length} stray)`
    : `removed table ip ${EGRESS_TABLE}: no pool SNATs`;
}
