/**
 * Datapath consistency: what the kernel should hold for the allocations (planned with the
 * datapath's own planner, so doctor and ADD can never disagree on what "complete" means),
 * and what it holds that nobody accounts for. Removing only that is the job of
 * doctor/datapath_fix.ts.
 *
 * "Provably ours and orphaned" means: the object has the exact shape vpcni makes (rule
 * priority 1000/2000 on a /32; a host link named prefix + 11 hex chars; a /32 host route
 * over such a link; a route table in T(E)'s range), and no allocation, no address the
 * daemon holds for a pod it cannot name, and no attached ENI accounts for it. Anything
 * else is never touched.
 *
 * @module
 */
import type { Route } from "../netlink/mod.ts";
import { describeRule, type PlannedRule } from "../cni/datapath/plan.ts";
import {
  compareEni,
  compareHostSysctls,
  comparePod,
  type Finding,
} from "../cni/datapath/compare.ts";
import { hostVethName } from "../cni/datapath/naming.ts";
import {
  type DatapathConfig,
  type DatapathKind,
  type EniInfo,
  MAIN_TABLE_ID,
  type PodAttachment,
  RULE_PRIORITY_FROM_POD,
  RULE_PRIORITY_TO_POD,
} from "../cni/datapath/types.ts";
import { linkName, type NetnsSnapshot } from "./kernel.ts";

export { describeRule };

/** One pod allocation, with the ENI it sits on when known. */
export interface AllocationFact {
  network: string;
  containerId: string;
  ifName: string;
  ip: string;
  eniId: string;
  pool: string;
  netns?: string;
  /**
   * The daemon's mount namespace did not reach `netns` (the plugin handed it over): a path
   * missing here says nothing about the pod.
   */
  netnsHidden?: boolean;
  podNamespace?: string;
  podName?: string;
  eni?: EniInfo;
}

/** The plugin settings that shape the datapath (from the conflist). */
export interface DatapathSettings {
  kind: DatapathKind;
  hostVethPrefix: string;
  mtu: number;
  serviceCidrs: string[];
  /** Node addresses routed over the host veth (ipvlan); empty: the host's global ones. */
  nodeIps?: string[];
}

/** A problem with one allocation's objects. */
export interface MissingObject {
  containerId: string;
  ip: string;
  what: string;
}

/** Something in the host netns that is provably ours and that nothing accounts for. */
export type Orphan =
  | { kind: "rule"; rule: PlannedRule; text: string }
  | { kind: "link"; name: string; text: string }
  | { kind: "route"; route: Route; text: string }
  | { kind: "table"; table: number; routes: Route[]; text: string };

/**
 * What doctor knows about pod addresses beyond the allocations. After a lost checkpoint the
 * allocations no longer name every running pod, so they alone cannot prove a pod's objects
 * orphaned.
 */
export interface PodAccounting {
  /**
   * Whether the allocations come from the daemon or a checkpoint doctor could read. When
   * not, every pod's rules, route and veth would look orphaned: none is called one.
   */
  allocationsKnown: boolean;
  /** Addresses the daemon holds for running pods no allocation names (/v1/routed-unknown). */
  routedUnknown: string[];
}

/** The result of comparing allocations with the kernel. */
export interface DatapathFindings {
  missing: MissingObject[];
  orphans: Orphan[];
  sysctl: string[];
  /** Allocations whose pod netns is gone (the runtime should have called DEL). */
  goneNetns: AllocationFact[];
  /** Addresses the daemon holds for pods no allocation names; their objects are kept. */
  held: string[];
  /**
   * Pod addresses the host routes that cannot be judged, the allocations being unknown
   * (no daemon, no readable checkpoint).
   */
  unjudged: string[];
}

/** The datapath config ADD was given, as far as the conflist tells it. */
function configOf(s: DatapathSettings): DatapathConfig {
  return {
    kind: s.kind,
    mtu: s.mtu,
    serviceCidrs: s.serviceCidrs,
    nodeIps: s.nodeIps ?? [],
    hostVethPrefix: s.hostVethPrefix,
  };
}

/** The attachment ADD made for an allocation. */
function attachmentOf(a: AllocationFact): PodAttachment {
  const prefixLen = a.eni ? Number(a.eni.subnetCidr.split("/")[1]) : 32;
  return {
    containerId: a.containerId,
    ifName: a.ifName,
    netns: a.netns ?? "",
    address: { ip: a.ip, prefixLen, gateway: a.eni?.gateway ?? "0.0.0.0", eni: a.eni },
  };
}

/**
 * Compares allocations with the host snapshot and each pod's snapshot (`pods` maps a netns
 * path to its snapshot; a missing key means the netns is gone).
 */
export function analyseDatapath(
  s: DatapathSettings,
  allocations: AllocationFact[],
  enis: EniInfo[],
  host: NetnsSnapshot,
  pods: Map<string, NetnsSnapshot>,
  sysctls: Record<string, string>,
  known: PodAccounting,
): DatapathFindings {
  const f: DatapathFindings = {
    missing: [],
    orphans: [],
    sysctl: [],
    goneNetns: [],
    held: [...new Set(known.routedUnknown)].sort(),
    unjudged: [],
  };
  const miss = (a: AllocationFact, what: string) =>
    f.missing.push({ containerId: a.containerId, ip: a.ip, what });

  // The comparator CNI CHECK uses (cni/datapath/compare.ts), over doctor's snapshots.
  const cfg = configOf(s);
  const hostView = { ...host, sysctls };
  const sysctl = (x: Finding) => x.kind === "sysctl";
  for (const a of allocations) {
    const pod = a.netns ? pods.get(a.netns) : undefined;
    if (a.netns && !pod && !a.netnsHidden) f.goneNetns.push(a);
    let found: Finding[];
    try {
      found = comparePod(cfg, attachmentOf(a), { host: hostView, pod });
    } catch {
      continue; // an allocation the planner refuses (a bad record): not a datapath to judge
    }
    for (const x of found) miss(a, x.text);
  }

  // The daemon sets up the host side of every ENI it attaches; the node's primary ENI is
  // set up by the first ADD of a pod on it, so without one it is not judged.
  const carrying = new Set(allocations.map((a) => a.eni?.id ?? a.eniId));
  for (const e of enis) {
    if ((e.primary || e.deviceIndex === 0) && !carrying.has(e.id)) continue;
    for (const x of compareEni(cfg, e, hostView)) {
      if (sysctl(x)) f.sysctl.push(x.text);
      else f.missing.push({ containerId: "-", ip: e.id, what: x.text });
    }
  }

  f.orphans = findOrphans(s, allocations, enis, host, known);
  if (!known.allocationsKnown) {
    // Said, so that "no orphans" is never read as "nothing here": these were not judged.
    const ips = shapedOrphans(s, allocations, enis, host, known.routedUnknown)
      .map((o) => podAddressOf(o, host)).filter((ip): ip is string => ip !== undefined);
    f.unjudged = [...new Set(ips)].sort();
  }

  f.sysctl.unshift(...compareHostSysctls(hostView).map((x) => x.text));
  // Strict reverse-path filtering drops pod traffic that arrives on a secondary ENI while
  // main's route back points at eth0. The effective value is the max of all and the link.
  const all = Number(sysctls["net.ipv4.conf.all.rp_filter"] ?? "0");
  for (const e of enis) {
    if (e.primary || e.deviceIndex === 0) continue;
    const link = host.links.find((l) => l.mac === e.mac);
    if (!link) continue;
    const own = Number(sysctls[`net.ipv4.conf.${link.name}.rp_filter`] ?? "0");
    if (Math.max(all, own) === 1) {
      f.sysctl.push(
        `rp_filter on ${link.name} (${e.id}) is strict (all=${all}, ${link.name}=${own}); ` +
          `pod replies via T(E) are dropped`,
      );
    }
  }
  return f;
}

/**
 * Objects of vpcni's exact shape in the host netns that no allocation, held address or ENI
 * explains. With the allocations unknown, a pod's rules, route and veth are never among
 * them: a running pod's would look exactly like a leftover's.
 */
export function findOrphans(
  s: DatapathSettings,
  allocations: AllocationFact[],
  enis: EniInfo[],
  host: NetnsSnapshot,
  known: PodAccounting,
): Orphan[] {
  const all = shapedOrphans(s, allocations, enis, host, known.routedUnknown);
  return known.allocationsKnown ? all : all.filter((o) => o.kind === "table");
}

/** The pod address an orphan candidate serves, when it serves one. */
function podAddressOf(o: Orphan, host: NetnsSnapshot): string | undefined {
  switch (o.kind) {
    case "rule":
      return (o.rule.dst ?? o.rule.src)?.slice(0, -3);
    case "route":
      return o.route.dst.slice(0, -3);
    case "link": {
      const index = host.links.find((l) => l.name === o.name)?.index;
      const r = host.routes.find((r) =>
        r.table === MAIN_TABLE_ID && r.dev === index && r.dst.endsWith("/32")
      );
      return r?.dst.slice(0, -3);
    }
    case "table":
      return undefined;
  }
}

/** Every object of vpcni's shape that the allocations, `held` and the ENIs leave unexplained. */
function shapedOrphans(
  s: DatapathSettings,
  allocations: AllocationFact[],
  enis: EniInfo[],
  host: NetnsSnapshot,
  held: string[],
): Orphan[] {
  const out: Orphan[] = [];
  const ips = new Set([...allocations.map((a) => a.ip), ...held]);
  const vethNames = new Set(
    allocations.map((a) => hostVethName(s.hostVethPrefix, a.containerId, a.ifName)),
  );
  // A held address's pod is unnamed, so its veth is found by the host route to it.
  const heldSet = new Set(held);
  const heldLinks = new Set(
    host.routes.filter((r) =>
      r.table === MAIN_TABLE_ID && r.dst.endsWith("/32") && heldSet.has(r.dst.slice(0, -3))
    ).map((r) => r.dev),
  );
  const ourName = new RegExp(`^${s.hostVethPrefix}[0-9a-f]{11}$`);
  const tables = new Set(
    enis.filter((e) => !e.primary && e.deviceIndex !== 0).map((e) => e.routeTable),
  );
  const tableBase = enis.find((e) => !e.primary && e.deviceIndex !== 0);
  const base = tableBase ? tableBase.routeTable - tableBase.deviceIndex : 100;

  for (const r of host.rules) {
    const sel = r.priority === RULE_PRIORITY_TO_POD
      ? r.dst
      : r.priority === RULE_PRIORITY_FROM_POD
      ? r.src
      : undefined;
    if (!sel || !sel.endsWith("/32") || r.iif || r.oif || r.fwmark || r.invert) continue;
    if (r.priority === RULE_PRIORITY_TO_POD && r.table !== MAIN_TABLE_ID) continue;
    const ip = sel.slice(0, -3);
    if (ips.has(ip)) continue;
    const rule: PlannedRule = r.priority === RULE_PRIORITY_TO_POD
      ? { priority: r.priority, dst: sel, table: r.table }
      : { priority: r.priority, src: sel, table: r.table };
    out.push({ kind: "rule", rule, text: `orphan ${describeRule(rule)}` });
  }
  const orphanLinks = new Set<number>();
  for (const l of host.links) {
    if (
      l.kind === "veth" && ourName.test(l.name) && !vethNames.has(l.name) &&
      !heldLinks.has(l.index)
    ) {
      orphanLinks.add(l.index);
      out.push({ kind: "link", name: l.name, text: `orphan host veth ${l.name}` });
    }
  }
  for (const r of host.routes) {
    if (r.table !== MAIN_TABLE_ID || !r.dst.endsWith("/32") || r.dev === undefined) continue;
    const dev = host.links.find((l) => l.index === r.dev);
    if (!dev || !ourName.test(dev.name) || orphanLinks.has(r.dev)) continue;
    if (!ips.has(r.dst.slice(0, -3))) {
      out.push({ kind: "route", route: r, text: `orphan route ${r.dst} dev ${dev.name}` });
    }
  }
  if (enis.length > 0) {
    const byTable = new Map<number, Route[]>();
    for (const r of host.routes) {
      if (r.table > base && r.table <= base + 64 && !tables.has(r.table)) {
        byTable.set(r.table, [...(byTable.get(r.table) ?? []), r]);
      }
    }
    for (const [t, routes] of byTable) {
      out.push({
        kind: "table",
        table: t,
        routes,
        text: `orphan route table ${t} (${routes.length} routes; no attached ENI uses it: ` +
          `${routes.map((r) => `${r.dst} dev ${linkName(host, r.dev)}`).join(", ")})`,
      });
    }
  }
  return out;
}
