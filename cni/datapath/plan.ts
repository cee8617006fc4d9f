/**
 * What a pod attachment consists of, as data: the ordered steps ADD performs, the links
 * CHECK expects, and a text form of every object for CHECK's problem list. Pure: the
 * kernel-facing facts (the ipvlan parent's index, the node's addresses) come in as
 * {@linkcode HostFacts}, so every datapath can be planned and tested without root.
 *
 * @module
 */
import { canonicalDst } from "../../base/ipv4.ts";
import { eniTable, hostVethName, podTempName } from "./naming.ts";
import {
  type AttachResult,
  type DatapathConfig,
  MAIN_TABLE_ID,
  type PodAttachment,
  RULE_PRIORITY_FROM_POD,
  RULE_PRIORITY_TO_POD,
  VETH_POD_GATEWAY,
} from "./types.ts";

/** Which network namespace an object lives in. */
export type Side = "host" | "pod";

/** A link the attachment owns. */
export interface PlannedLink {
  side: Side;
  name: string;
  kind: "veth" | "ipvlan";
  ipvlanMode?: "l2" | "l3s";
  mtu: number;
}

/** A route; `dev` is a link name on the same side. */
export interface PlannedRoute {
  /** "default" or a canonical CIDR. */
  dst: string;
  gateway?: string;
  dev: string;
  scope: "link" | "universe";
  table: number;
  src?: string;
  onlink?: boolean;
}

/** A host policy rule (rules are only ever made on the host). */
export interface PlannedRule {
  priority: number;
  src?: string;
  dst?: string;
  /** Only lookups already bound to this output link (ipvlan l3s egress) match. */
  oif?: string;
  table: number;
}

/** A permanent neighbour entry whose MAC is that of another planned link. */
export interface PlannedNeigh {
  link: string;
  ip: string;
  macOf: { side: Side; link: string };
}

/** One thing ADD does, in order. */
export type Step =
  | { op: "veth"; hostName: string; podName: string; mtu: number }
  | { op: "ipvlan"; podName: string; parentIndex: number; mode: "l2" | "l3s"; mtu: number }
  | { op: "rename"; from: string; to: string }
  | { op: "up"; side: Side; link: string }
  | { op: "addr"; side: Side; link: string; cidr: string }
  | { op: "route"; side: Side; route: PlannedRoute }
  | { op: "neigh"; side: Side; neigh: PlannedNeigh }
  | { op: "rule"; rule: PlannedRule }
  | { op: "sysctl"; side: Side; key: string; value: string };

/** What the host tells the planner. */
export interface HostFacts {
  /** ipvlan: index of the parent link (the ENI) in the host netns. */
  parentIndex?: number;
  /** ipvlan: the node addresses to route over the host veth (cfg.nodeIps, or discovered). */
  nodeIps: string[];
  /** ipvlan-l3s: name of the ENI's link, which the `from` rule is bound to. */
  eniLinkName?: string;
}

/** A planned attachment. */
export interface Plan {
  hostVeth: string;
  podTemp: string;
  podIf: string;
  /** The ENI's table, main for the primary ENI. */
  table: number;
  links: PlannedLink[];
  steps: Step[];
  /** The pod's address as a CIDR, as put on the pod interface. */
  podCidr: string;
  /** The gateway the pod's default route uses. */
  podGateway: string;
  /** Result routes (pod side), for the CNI result. */
  resultRoutes: AttachResult["routes"];
}

/**
 * The rules of a pod IP: `to ip lookup main`, and off the main table `from ip lookup T(E)`
 * (restricted to lookups bound to `oif` when given).
 */
export function podRules(ip: string, table: number, oif?: string): PlannedRule[] {
  const rules: PlannedRule[] = [
    { priority: RULE_PRIORITY_TO_POD, dst: `${ip}/32`, table: MAIN_TABLE_ID },
  ];
  if (table !== MAIN_TABLE_ID) {
    const from: PlannedRule = { priority: RULE_PRIORITY_FROM_POD, src: `${ip}/32`, table };
    if (oif) from.oif = oif;
    rules.push(from);
  }
  return rules;
}

/** Plans the attachment of `pod` with datapath `cfg.kind`. */
export function planAttachment(cfg: DatapathConfig, pod: PodAttachment, facts: HostFacts): Plan {
  const a = pod.address;
  const hostVeth = hostVethName(cfg.hostVethPrefix, pod.containerId, pod.ifName);
  const podTemp = podTempName(pod.containerId, pod.ifName);
  const table = eniTable(a.eni);
  const base = { hostVeth, podTemp, podIf: pod.ifName, table };
  return cfg.kind === "veth"
    ? planVeth(cfg, a.ip, base)
    : planIpvlan(cfg, pod, facts, base, cfg.kind === "ipvlan-l2" ? "l2" : "l3s");
}

type PlanBase = Pick<Plan, "hostVeth" | "podTemp" | "podIf" | "table">;

function hostRoute(ip: string, hostVeth: string): PlannedRoute {
  return { dst: `${ip}/32`, dev: hostVeth, scope: "link", table: MAIN_TABLE_ID };
}

function planVeth(cfg: DatapathConfig, ip: string, b: PlanBase): Plan {
  const { hostVeth, podTemp, podIf } = b;
  const gw = VETH_POD_GATEWAY;
  const steps: Step[] = [
    { op: "veth", hostName: hostVeth, podName: podTemp, mtu: cfg.mtu },
    { op: "rename", from: podTemp, to: podIf },
    { op: "up", side: "host", link: hostVeth },
    { op: "up", side: "pod", link: podIf },
    { op: "addr", side: "pod", link: podIf, cidr: `${ip}/32` },
    {
      op: "route",
      side: "pod",
      route: { dst: `${gw}/32`, dev: podIf, scope: "link", table: MAIN_TABLE_ID },
    },
    {
      op: "route",
      side: "pod",
      route: { dst: "default", gateway: gw, dev: podIf, scope: "universe", table: MAIN_TABLE_ID },
    },
    {
      op: "neigh",
      side: "pod",
      neigh: { link: podIf, ip: gw, macOf: { side: "host", link: hostVeth } },
    },
    ...podRules(ip, b.table).map((rule): Step => ({ op: "rule", rule })),
    { op: "route", side: "host", route: hostRoute(ip, hostVeth) },
  ];
  return {
    ...b,
    links: [
      { side: "host", name: hostVeth, kind: "veth", mtu: cfg.mtu },
      { side: "pod", name: podIf, kind: "veth", mtu: cfg.mtu },
    ],
    steps,
    podCidr: `${ip}/32`,
    podGateway: gw,
    resultRoutes: [{ dst: "0.0.0.0/0", gw }],
  };
}

function planIpvlan(
  cfg: DatapathConfig,
  pod: PodAttachment,
  facts: HostFacts,
  b: PlanBase,
  mode: "l2" | "l3s",
): Plan {
  const { hostVeth, podTemp, podIf } = b;
  const a = pod.address;
  if (facts.parentIndex === undefined) throw new Error("ipvlan plan needs the parent link");
  const podCidr = `${a.ip}/${a.prefixLen}`;
  const llgw = VETH_POD_GATEWAY;
  // The unnumbered veth keeps the host-side name inside the pod: one name per attachment.
  const podVeth = hostVeth;
  const overVeth = (dst: string): Step => ({
    op: "route",
    side: "pod",
    route: {
      dst: canonicalDst(dst),
      gateway: llgw,
      dev: podVeth,
      scope: "universe",
      table: MAIN_TABLE_ID,
      src: a.ip,
    },
  });
  const viaHost = [...new Set(facts.nodeIps)].map((ip) => `${ip}/32`).concat(
    [...new Set(cfg.serviceCidrs.map(canonicalDst))],
  );
  const steps: Step[] = [
    { op: "ipvlan", podName: podTemp, parentIndex: facts.parentIndex, mode, mtu: cfg.mtu },
    { op: "rename", from: podTemp, to: podIf },
    { op: "up", side: "pod", link: podIf },
    { op: "addr", side: "pod", link: podIf, cidr: podCidr },
    {
      op: "route",
      side: "pod",
      route: {
        dst: "default",
        gateway: a.gateway,
        dev: podIf,
        scope: "universe",
        table: MAIN_TABLE_ID,
        onlink: true,
      },
    },
    { op: "veth", hostName: hostVeth, podName: podVeth, mtu: cfg.mtu },
    { op: "up", side: "host", link: hostVeth },
    { op: "up", side: "pod", link: podVeth },
    // No reverse-path check on this link: only the host sends on it, and the host forwards
    // here the answers to the pod's SNATed connections (ipvlan-l3s), whose sources the pod
    // routes through its ipvlan link. The link has no address, and on such a link even loose
    // mode drops every source not routed through it.
    { op: "sysctl", side: "pod", key: `net.ipv4.conf.${podVeth}.rp_filter`, value: "0" },
    {
      op: "route",
      side: "pod",
      route: { dst: `${llgw}/32`, dev: podVeth, scope: "link", table: MAIN_TABLE_ID },
    },
    {
      op: "neigh",
      side: "pod",
      neigh: { link: podVeth, ip: llgw, macOf: { side: "host", link: hostVeth } },
    },
    ...viaHost.map(overVeth),
    // The pod's address is not on the veth, so the host is told its MAC instead of asking.
    {
      op: "neigh",
      side: "host",
      neigh: { link: hostVeth, ip: a.ip, macOf: { side: "pod", link: podVeth } },
    },
    // l3s: the slave's egress is routed by the host, bound to the ENI's link: it needs
    // `from ip oif E lookup T(E)`. Bound to E, the rule leaves alone what the host forwards
    // for the pod (service traffic it masquerades, which must leave by the node's address).
    // l2: the slave's egress never meets the host's routing, so no `from` rule at all.
    ...(mode === "l3s" ? podRules(a.ip, b.table, facts.eniLinkName) : podRules(a.ip, MAIN_TABLE_ID))
      .map((rule): Step => ({ op: "rule", rule })),
    { op: "route", side: "host", route: hostRoute(a.ip, hostVeth) },
  ];
  return {
    ...b,
    links: [
      { side: "host", name: hostVeth, kind: "veth", mtu: cfg.mtu },
      { side: "pod", name: podIf, kind: "ipvlan", ipvlanMode: mode, mtu: cfg.mtu },
      { side: "pod", name: podVeth, kind: "veth", mtu: cfg.mtu },
    ],
    steps,
    podCidr,
    podGateway: a.gateway,
    resultRoutes: [
      { dst: "0.0.0.0/0", gw: a.gateway },
      ...viaHost.map((dst) => ({ dst, gw: llgw })),
    ],
  };
}

/** "main" for 254, the number otherwise. */
export function tableName(t: number): string {
  return t === MAIN_TABLE_ID ? "main" : String(t);
}

/** Text form of a route, as `ip route` would print it. */
export function describeRoute(r: PlannedRoute): string {
  let s = `route ${r.dst}`;
  if (r.gateway) s += ` via ${r.gateway}`;
  s += ` dev ${r.dev}`;
  if (r.scope === "link") s += " scope link";
  if (r.src) s += ` src ${r.src}`;
  return s + ` table ${tableName(r.table)}`;
}

/** Text form of a rule, as `ip rule` would print it. */
export function describeRule(r: PlannedRule): string {
  let s = `rule ${r.priority}:`;
  if (r.src) s += ` from ${r.src}`;
  if (r.dst) s += ` to ${r.dst}`;
  if (r.oif) s += ` oif ${r.oif}`;
  return s + ` lookup ${tableName(r.table)}`;
}

/** Text form of a neighbour entry. */
export function describeNeigh(n: PlannedNeigh): string {
  return `neighbour ${n.ip} dev ${n.link} (permanent, MAC of ${n.macOf.side} ${n.macOf.link})`;
}
