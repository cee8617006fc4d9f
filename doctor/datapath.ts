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
import {
  planAttachment,
  type PlannedRoute,
  type PlannedRule,
  type Step,
} from "../cni/datapath/plan.ts";
import { eniTableRoutes, HOST_SYSCTLS } from "../cni/datapath/host.ts";
import { hostVethName } from "../cni/datapath/naming.ts";
import { canonicalDst } from "../base/ipv4.ts";
import {
  type DatapathKind,
  type EniInfo,
  MAIN_TABLE_ID,
  RULE_PRIORITY_FROM_POD,
  RULE_PRIORITY_TO_POD,
} from "../cni/datapath/types.ts";
import { linkName, type NetnsSnapshot } from "./kernel.ts";

/** One pod allocation, with the ENI it sits on when known. */
export interface AllocationFact {
  network: string;
  containerId: string;
  ifName: string;
  ip: string;
  eniId: string;
  pool: string;
  netns?: string;
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

function sameRule(
  r: { priority: number; src?: string; dst?: string; table: number },
  p: PlannedRule,
) {
  return r.priority === p.priority && (r.src ?? "") === (p.src ?? "") &&
    (r.dst ?? "") === (p.dst ?? "") && r.table === p.table;
}

function routeMatches(snap: NetnsSnapshot, r: PlannedRoute): boolean {
  const dev = snap.links.find((l) => l.name === r.dev)?.index;
  const dst = r.dst === "default" ? "default" : canonicalDst(r.dst);
  return snap.routes.some((h) =>
    (h.dst === dst || (dst === "default" && h.dst === "0.0.0.0/0")) && h.table === r.table &&
    h.dev === dev && (r.gateway === undefined || h.gateway === r.gateway)
  );
}

function describeRoute(r: PlannedRoute): string {
  return `route ${r.dst}${r.gateway ? ` via ${r.gateway}` : ""} dev ${r.dev} table ${
    r.table === MAIN_TABLE_ID ? "main" : r.table
  }`;
}

/** A rule as `ip rule` would show it, e.g. `rule 1000: to 10.0.1.9/32 lookup main`. */
export function describeRule(r: PlannedRule): string {
  return `rule ${r.priority}: ${r.src ? `from ${r.src} ` : ""}${
    r.dst ? `to ${r.dst} ` : ""
  }lookup ${r.table === MAIN_TABLE_ID ? "main" : r.table}`;
}

/** What ADD made for one allocation, per side, as the datapath planner lays it out. */
function plannedSteps(
  s: DatapathSettings,
  a: AllocationFact,
  host: NetnsSnapshot,
): Step[] | undefined {
  const parent = a.eni ? host.links.find((l) => l.mac === a.eni!.mac) : undefined;
  const prefixLen = a.eni ? Number(a.eni.subnetCidr.split("/")[1]) : 32;
  try {
    return planAttachment(
      {
        kind: s.kind,
        mtu: s.mtu,
        serviceCidrs: s.serviceCidrs,
        nodeIps: [],
        hostVethPrefix: s.hostVethPrefix,
      },
      {
        containerId: a.containerId,
        ifName: a.ifName,
        netns: a.netns ?? "",
        address: { ip: a.ip, prefixLen, gateway: a.eni?.gateway ?? "0.0.0.0", eni: a.eni },
      },
      { parentIndex: parent?.index ?? 0, nodeIps: [] },
    ).steps;
  } catch {
    return undefined;
  }
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

  for (const a of allocations) {
    const steps = plannedSteps(s, a, host);
    if (!steps) continue;
    const pod = a.netns ? pods.get(a.netns) : undefined;
    if (a.netns && !pod) f.goneNetns.push(a);
    for (const st of steps) {
      if (st.op === "rule" && !host.rules.some((r) => sameRule(r, st.rule))) {
        miss(a, `${describeRule(st.rule)} missing`);
      } else if (st.op === "route" && st.side === "host" && !routeMatches(host, st.route)) {
        miss(a, `host ${describeRoute(st.route)} missing`);
      } else if (st.op === "veth" && !host.links.some((l) => l.name === st.hostName)) {
        miss(a, `host veth ${st.hostName} missing`);
      } else if (st.op === "neigh" && st.side === "host") {
        const idx = host.links.find((l) => l.name === st.neigh.link)?.index;
        if (!host.neighbours.some((n) => n.index === idx && n.ip === st.neigh.ip)) {
          miss(a, `host neighbour ${st.neigh.ip} dev ${st.neigh.link} missing`);
        }
      } else if (pod && st.op === "addr" && st.side === "pod") {
        const idx = pod.links.find((l) => l.name === st.link)?.index;
        const [ip, len] = st.cidr.split("/");
        if (
          !pod.addresses.some((x) =>
            x.index === idx && x.address === ip && x.prefixLen === Number(len)
          )
        ) {
          miss(a, `pod address ${st.cidr} on ${st.link} missing`);
        }
      } else if (pod && st.op === "route" && st.side === "pod" && !routeMatches(pod, st.route)) {
        miss(a, `pod ${describeRoute(st.route)} missing`);
      } else if (pod && st.op === "neigh" && st.side === "pod") {
        const idx = pod.links.find((l) => l.name === st.neigh.link)?.index;
        if (
          !pod.neighbours.some((n) =>
            n.index === idx && n.ip === st.neigh.ip && n.state === "permanent"
          )
        ) {
          miss(a, `pod neighbour ${st.neigh.ip} dev ${st.neigh.link} missing`);
        }
      }
    }
  }

  // T(E) of every attached ENI but the primary.
  for (const e of enis) {
    if (e.primary || e.deviceIndex === 0) continue;
    const link = host.links.find((l) => l.mac === e.mac);
    if (!link) continue; // not attached (yet): the consistency check reports it
    for (const r of eniTableRoutes(e, link.name)) {
      if (!routeMatches(host, r)) {
        f.missing.push({
          containerId: "-",
          ip: e.id,
          what: `${describeRoute(r)} (T(E) of ${e.id}) missing`,
        });
      }
    }
  }

  f.orphans = findOrphans(s, allocations, enis, host, known);
  if (!known.allocationsKnown) {
    // Said, so that "no orphans" is never read as "nothing here": these were not judged.
    const ips = shapedOrphans(s, allocations, enis, host, known.routedUnknown)
      .map((o) => podAddressOf(o, host)).filter((ip): ip is string => ip !== undefined);
    f.unjudged = [...new Set(ips)].sort();
  }

  for (const [key, want] of HOST_SYSCTLS) {
    if (sysctls[key] !== undefined && sysctls[key] !== want) {
      f.sysctl.push(`${key} = ${sysctls[key]}, the datapath needs ${want}`);
    }
  }
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
