/**
 * The one comparator of a pod's datapath: what the planner (plan.ts) says should exist
 * against a {@linkcode KernelView} of the host and the pod. CNI CHECK feeds it a view read
 * live from its netlink sockets; `vpcni doctor datapath` feeds it its snapshot. Both report
 * its findings in its words, so they cannot disagree on what a healthy pod is.
 *
 * Each finding is one line, side first: "host: rule 2000: from 10.0.1.23/32 oif eth1 lookup
 * 101 missing". Pure: no netlink I/O here.
 *
 * @module
 */
import type { Link, Route } from "../../netlink/mod.ts";
import { eniAddress, eniLinkSysctls, eniTableRoutes, HOST_SYSCTLS } from "./host.ts";
import {
  describeNeigh,
  describeRoute,
  describeRule,
  type HostFacts,
  type Plan,
  planAttachment,
  type PlannedRoute,
  type Side,
} from "./plan.ts";
import type { DatapathConfig, DatapathEni, PodAttachment } from "./types.ts";
import { MAIN_TABLE_ID } from "./types.ts";
import type { KernelView, NetnsView } from "./view.ts";

export type { KernelView, NetnsView } from "./view.ts";

/** One difference between what should be and what the kernel shows. */
export interface Finding {
  side: Side;
  /** A sysctl with the wrong value, or an object missing or wrong. */
  kind: "sysctl" | "object";
  /** The finding as CHECK and doctor print it, side first. */
  text: string;
}

const found = (side: Side, kind: Finding["kind"], what: string): Finding => ({
  side,
  kind,
  text: `${side}: ${what}`,
});

/** The link with `mac` in a view (MACs compared in lower case). */
export function linkByMac(v: NetnsView, mac: string): Link | undefined {
  const want = mac.toLowerCase();
  return v.links.find((l) => l.mac.toLowerCase() === want);
}

/** What the comparator derives from the host view for one pod: settings, facts, problems. */
export interface PodContext {
  /** The config with the pod's MTU bounded by the link its traffic leaves by. */
  cfg: DatapathConfig;
  facts: HostFacts;
  /** The ipvlan parent's index, when it was found. */
  parentIndex?: number;
  findings: Finding[];
}

/**
 * The settings ADD would have planned `pod` with on this host: the MTU bounded by the ENI's
 * link (or the ipvlan parent), the parent's index, the node addresses routed over the veth.
 */
export function podContext(
  config: DatapathConfig,
  pod: PodAttachment,
  host: NetnsView,
): PodContext {
  const a = pod.address;
  const findings: Finding[] = [];
  let parent: Link | undefined;
  if (a.eni) {
    parent = linkByMac(host, a.eni.mac);
    if (!parent) {
      findings.push(found(
        "host",
        "object",
        `no link has MAC ${a.eni.mac}; is ${a.eni.id} attached to this instance?`,
      ));
    }
  } else if (config.kind !== "veth") {
    if (a.master) {
      parent = host.links.find((l) => l.name === a.master);
      if (!parent) findings.push(found("host", "object", `master ${a.master} does not exist`));
    } else {
      const def = host.routes.find((r) =>
        r.table === MAIN_TABLE_ID && isDefault(r.dst) && r.dev !== undefined
      );
      parent = host.links.find((l) => l.index === def?.dev);
      if (!parent) {
        findings.push(found("host", "object", "no default route to take the ipvlan parent from"));
      }
    }
  }
  const cfg = parent && parent.mtu < config.mtu ? { ...config, mtu: parent.mtu } : config;
  if (cfg.kind === "veth") return { cfg, facts: { nodeIps: [] }, findings };
  const nodeIps = cfg.nodeIps.length > 0
    ? cfg.nodeIps
    : host.addresses.filter((x) => x.scope === "universe").map((x) => x.address);
  const facts: HostFacts = parent
    ? { parentIndex: parent.index, nodeIps, eniLinkName: a.eni ? parent.name : undefined }
    : { parentIndex: -1, nodeIps };
  return { cfg, facts, parentIndex: parent?.index, findings };
}

/** Every difference of one pod's attachment; [] when it is as ADD made it. */
export function comparePod(
  config: DatapathConfig,
  pod: PodAttachment,
  view: KernelView,
): Finding[] {
  const ctx = podContext(config, pod, view.host);
  const plan = planAttachment(ctx.cfg, pod, ctx.facts);
  return [...ctx.findings, ...comparePlan(plan, view, ctx.parentIndex)];
}

/** The sysctl keys {@linkcode comparePod} and {@linkcode compareEni} read, per side. */
export function podSysctlKeys(
  config: DatapathConfig,
  pod: PodAttachment,
  host: NetnsView,
): Record<Side, string[]> {
  const ctx = podContext(config, pod, host);
  const plan = planAttachment(ctx.cfg, pod, ctx.facts);
  const keys: Record<Side, string[]> = { host: HOST_SYSCTLS.map(([k]) => k), pod: [] };
  const eniLink = pod.address.eni && linkByMac(host, pod.address.eni.mac);
  if (eniLink) keys.host.push(...eniLinkSysctls(config, eniLink.name).map(([k]) => k));
  for (const s of plan.steps) if (s.op === "sysctl") keys[s.side].push(s.key);
  return keys;
}

/**
 * Every sysctl key the comparator may ask of a netns with these links, whatever the pods:
 * what a snapshot (doctor) reads so that any pod and ENI on it can be judged.
 */
export function viewSysctlKeys(links: Link[]): string[] {
  const keys = HOST_SYSCTLS.map(([k]) => k);
  for (const l of links) {
    if (l.name === "lo") continue;
    keys.push(`net.ipv4.conf.${l.name}.rp_filter`);
    keys.push(...eniLinkSysctls({ kind: "veth" }, l.name).map(([k]) => k));
  }
  return keys;
}

function isDefault(dst: string): boolean {
  return dst === "default" || dst === "0.0.0.0/0";
}

/** Whether `have` holds `want` exactly: dst, table, output link, gateway, scope, source. */
export function routeMatches(want: PlannedRoute, have: Route[], devIndex: number): boolean {
  return have.some((h) =>
    sameDst(h.dst, want.dst) && h.table === want.table && h.type !== "local" &&
    h.dev === devIndex && (h.gateway ?? "") === (want.gateway ?? "") && h.scope === want.scope &&
    (want.src === undefined || h.src === want.src)
  );
}

function sameDst(have: string, want: string): boolean {
  return have === want || (isDefault(have) && isDefault(want));
}

/**
 * What is wrong with one planned route, or undefined when it is there as planned. `links`
 * (the same netns's) name the link a wrong route found leaves by.
 */
export function routeProblem(
  want: PlannedRoute,
  have: Route[],
  dev: Link | undefined,
  links: Link[] = [],
): string | undefined {
  if (!dev) return undefined; // its link is missing, already reported
  if (routeMatches(want, have, dev.index)) return undefined;
  const text = describeRoute(want);
  const same = have.filter((h) =>
    sameDst(h.dst, want.dst) && h.table === want.table && h.type !== "local"
  );
  if (same.length === 0) return `${text} missing`;
  const h = same[0];
  const name = links.find((l) => l.index === h.dev)?.name ?? `ifindex ${h.dev ?? "none"}`;
  return `${text} is wrong: found ${h.dst}${h.gateway ? ` via ${h.gateway}` : ""} dev ${name}${
    h.scope === want.scope ? "" : ` scope ${h.scope}`
  }${h.src ? ` src ${h.src}` : ""}`;
}

/**
 * Every difference between `plan` and the view. The pod side is judged only while the pod's
 * view is there. `parentIndex` is the ipvlan parent each ipvlan link must hang off.
 */
export function comparePlan(plan: Plan, view: KernelView, parentIndex?: number): Finding[] {
  const out: Finding[] = [];
  const side = (s: Side) => (s === "host" ? view.host : view.pod);
  const link = (s: Side, name: string) => side(s)?.links.find((l) => l.name === name);
  const object = (s: Side, what: string) => out.push(found(s, "object", what));

  for (const want of plan.links) {
    if (!side(want.side)) continue;
    const l = link(want.side, want.name);
    const where = `link ${want.name}`;
    if (!l) {
      object(want.side, `${where} missing`);
      continue;
    }
    if (l.kind !== want.kind) {
      object(want.side, `${where} is ${l.kind ?? "a device"}, expected ${want.kind}`);
      continue;
    }
    if (want.ipvlanMode && l.ipvlanMode !== want.ipvlanMode) {
      object(want.side, `${where} has ipvlan mode ${l.ipvlanMode}, expected ${want.ipvlanMode}`);
    }
    if (want.kind === "ipvlan" && parentIndex !== undefined && l.parentIndex !== parentIndex) {
      object(
        want.side,
        `${where} is an ipvlan of host ifindex ${l.parentIndex}, expected ${parentIndex}`,
      );
    }
    // The spec lets later plugins in the chain change what we made (tuning sets MTUs), so
    // a pod-side MTU is not ours to hold; the host side is.
    if (want.side === "host" && l.mtu !== want.mtu) {
      object(want.side, `${where} has MTU ${l.mtu}, expected ${want.mtu}`);
    }
    if (!l.up) object(want.side, `${where} is down`);
  }
  // The host veth must be paired with the pod end the plan names (not some other link).
  const hostVeth = link("host", plan.hostVeth);
  const podEnd = plan.links.find((l) => l.side === "pod" && l.kind === "veth");
  const podEndLink = podEnd && link("pod", podEnd.name);
  if (hostVeth?.kind === "veth" && podEndLink && hostVeth.parentIndex !== podEndLink.index) {
    object("host", `link ${plan.hostVeth} is not the peer of pod link ${podEnd!.name}`);
  }

  for (const step of plan.steps) {
    switch (step.op) {
      case "addr": {
        const l = link(step.side, step.link);
        if (!l) break; // already reported, or the pod's view is absent
        const have = side(step.side)!.addresses.some((a) =>
          a.index === l.index && `${a.address}/${a.prefixLen}` === step.cidr
        );
        if (!have) object(step.side, `address ${step.cidr} on ${step.link} missing`);
        break;
      }
      case "route": {
        const v = side(step.side);
        if (!v) break;
        const p = routeProblem(step.route, v.routes, link(step.side, step.route.dev), v.links);
        if (p) object(step.side, p);
        break;
      }
      case "neigh": {
        const n = step.neigh;
        const l = link(step.side, n.link);
        if (!l) break;
        // The MAC is judged when its link is in view; without the pod's view (doctor, a pod
        // netns gone) the entry is judged by its presence and state.
        const macLink = side(n.macOf.side) ? link(n.macOf.side, n.macOf.link) : undefined;
        if (side(n.macOf.side) && !macLink) break; // its link is missing, already reported
        const have = side(step.side)!.neighbours.find((e) => e.index === l.index && e.ip === n.ip);
        if (!have) object(step.side, `${describeNeigh(n)} missing`);
        else if (
          !have.state.includes("permanent") || (macLink !== undefined && have.mac !== macLink.mac)
        ) {
          object(
            step.side,
            `${describeNeigh(n)} is wrong: ${have.mac ?? "no MAC"} ${have.state}, expected ${
              macLink?.mac ?? "a"
            } permanent`,
          );
        }
        break;
      }
      case "rule": {
        const r = step.rule;
        const ok = view.host.rules.some((h) =>
          h.priority === r.priority && h.table === r.table && h.src === r.src &&
          h.dst === r.dst && !h.iif && h.oif === r.oif && h.fwmark === undefined && !h.invert
        );
        if (!ok) object("host", `${describeRule(r)} missing`);
        break;
      }
      case "sysctl": {
        const v = side(step.side)?.sysctls?.[step.key];
        if (v !== undefined && v !== step.value) {
          out.push(
            found(step.side, "sysctl", `sysctl ${step.key} is ${v}, expected ${step.value}`),
          );
        }
        break;
      }
    }
  }
  return out;
}

/**
 * The host setup of one ENI: its link up, its link's sysctls, and for a secondary ENI its
 * own address and its table T(E). An ENI with no link here yields nothing: the pods on it
 * report that ({@linkcode podContext}).
 */
export function compareEni(cfg: DatapathConfig, eni: DatapathEni, host: NetnsView): Finding[] {
  const link = linkByMac(host, eni.mac);
  if (!link) return [];
  const out: Finding[] = [];
  if (!link.up) out.push(found("host", "object", `ENI link ${link.name} (${eni.id}) is down`));
  for (const [key, value] of eniLinkSysctls(cfg, link.name)) {
    const v = host.sysctls?.[key];
    if (v !== undefined && v !== value) {
      out.push(found("host", "sysctl", `sysctl ${key} is ${v}, expected ${value}`));
    }
  }
  if (eni.primary || eni.deviceIndex === 0) return out;
  const own = eniAddress(eni);
  if (
    own &&
    !host.addresses.some((a) => a.index === link.index && `${a.address}/${a.prefixLen}` === own)
  ) {
    out.push(found("host", "object", `address ${own} on ENI link ${link.name} missing`));
  }
  for (const r of eniTableRoutes(eni, link.name)) {
    const p = routeProblem(r, host.routes, link, host.links);
    if (p) out.push(found("host", "object", p));
  }
  return out;
}

/** The sysctls every datapath needs on the host (forwarding), as far as the view read them. */
export function compareHostSysctls(host: NetnsView): Finding[] {
  const out: Finding[] = [];
  for (const [key, value] of HOST_SYSCTLS) {
    const v = host.sysctls?.[key];
    if (v !== undefined && v !== value) {
      out.push(found("host", "sysctl", `sysctl ${key} is ${v}, expected ${value}`));
    }
  }
  return out;
}
