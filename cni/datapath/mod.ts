/**
 * The pod datapaths: `veth`, `ipvlan-l2` and `ipvlan-l3s` (README.md, "The
 * datapaths"). The CNI plugin calls {@linkcode attachPod} on ADD, {@linkcode detachPod} on
 * DEL and {@linkcode checkPod} on CHECK. All synchronous (netlink over blocking FFI); no npm
 * imports.
 *
 * @module
 */
import { findLink, findLinkByMac, getLink, NetlinkSocket, netnsExists } from "../../netlink/mod.ts";
import { applyPlan, type Sockets } from "./apply.ts";
import { compareEni, compareHostSysctls, comparePod, podSysctlKeys } from "./compare.ts";
import { readNetnsView, readSysctls } from "./view.ts";
import { deleteHostVeth, deletePodLinks, deletePodRules, podIpOfHostVeth } from "./detach.ts";
import {
  DatapathError,
  DatapathInputError,
  IfNameTakenError,
  UnusableAddressError,
} from "./errors.ts";
import { eniLink, ensureEni, ensureHostSysctls, nodeIpsOf, resolveParent } from "./host.ts";
import { isIpv4 } from "../../base/ipv4.ts";
import { isNodeAddress, macSet, refuseOwnNetns, unusableAddressReason } from "./guard.ts";
import { hostVethName, podTempName } from "./naming.ts";
import { type HostFacts, type Plan, planAttachment } from "./plan.ts";
import type {
  AttachResult,
  DatapathConfig,
  DatapathEni,
  PodAttachment,
  PodDetachment,
} from "./types.ts";
import { validateAttachment, validateConfig, validateDetachment } from "./validate.ts";

export * from "./types.ts";
export {
  DatapathError,
  DatapathInputError,
  IfNameTakenError,
  UnusableAddressError,
} from "./errors.ts";
export { isOwnNetns, unusableAddressReason } from "./guard.ts";
export { hostVethName } from "./naming.ts";

function openPod(netns: string): NetlinkSocket {
  if (!netnsExists(netns)) throw new DatapathInputError(`netns ${netns} does not exist`);
  try {
    return NetlinkSocket.openIn(netns);
  } catch (e) {
    throw new DatapathError(`pod: open netns ${netns}`, e);
  }
}

function withSockets<T>(netns: string, fn: (s: Sockets) => T): T {
  refuseOwnNetns(netns, "wiring a pod into it");
  const host = NetlinkSocket.open();
  try {
    const pod = openPod(netns);
    try {
      return fn({ host, pod, netns });
    } finally {
      pod.close();
    }
  } finally {
    host.close();
  }
}

function hostFacts(s: Sockets, cfg: DatapathConfig, pod: PodAttachment): HostFacts {
  if (cfg.kind === "veth") return { nodeIps: [] };
  const parent = resolveParent(s.host, pod.address);
  return {
    parentIndex: parent.index,
    nodeIps: nodeIpsOf(s.host, cfg),
    eniLinkName: pod.address.eni ? parent.name : undefined,
  };
}

/**
 * The config with the pod's MTU bounded by the link its traffic leaves by: the ENI's link
 * (or the ipvlan parent). A pod never gets more than that link carries, and the link is
 * never changed for a pod.
 */
function boundedConfig(s: Sockets, cfg: DatapathConfig, pod: PodAttachment): DatapathConfig {
  let bound: number | undefined;
  if (pod.address.eni) bound = eniLink(s.host, pod.address.eni, 0).mtu;
  else if (cfg.kind !== "veth") bound = resolveParent(s.host, pod.address).mtu;
  return bound !== undefined && bound < cfg.mtu ? { ...cfg, mtu: bound } : cfg;
}

/** Refuses an address that is one of the node's own: giving it to a pod takes it away. */
function refuseNodeAddress(s: Sockets, cfg: DatapathConfig, ip: string): void {
  if (isNodeAddress(s.host, ip) || cfg.nodeIps.includes(ip)) {
    throw new UnusableAddressError(ip, "one of the node's own addresses");
  }
}

/**
 * ADD: wires the pod into the host with datapath `cfg.kind`. Host setup for the pod's ENI
 * is done first (idempotent, shared with other pods, never undone; the ENI link's MTU is
 * never changed, the pod gets at most that MTU). On any failure everything this call made
 * for the pod is removed before the error is thrown. Refused before anything changes: an
 * address no pod may have ({@linkcode UnusableAddressError}), a pod netns that is the
 * node's own, and a `CNI_IFNAME` the pod's netns already has ({@linkcode IfNameTakenError}:
 * that link is not ours, so nothing may touch it).
 */
export function attachPod(cfg: DatapathConfig, pod: PodAttachment): AttachResult {
  validateConfig(cfg);
  // Before the shape checks, so such an address is named for what it is.
  const unusable = typeof pod?.address?.ip === "string" && isIpv4(pod.address.ip)
    ? unusableAddressReason(pod.address.ip, pod.address.prefixLen)
    : undefined;
  if (unusable) throw new UnusableAddressError(pod.address.ip, unusable);
  validateAttachment(pod);
  return withSockets(pod.netns, (s) => {
    refuseNodeAddress(s, cfg, pod.address.ip);
    if (findLink(s.pod, pod.ifName)) throw new IfNameTakenError(pod.ifName, pod.netns);
    ensureHostSysctls();
    if (pod.address.eni) ensureEni(s.host, cfg, pod.address.eni);
    const podCfg = boundedConfig(s, cfg, pod);
    const plan = planAttachment(podCfg, pod, hostFacts(s, podCfg, pod));
    applyPlan(plan, s);
    try {
      return resultOf(plan, s, pod.netns);
    } catch (e) {
      detachPod(cfg, pod);
      throw new DatapathError("read back the attachment", e);
    }
  });
}

function resultOf(plan: Plan, s: Sockets, netns: string): AttachResult {
  const mtu = plan.links[0].mtu;
  return {
    interfaces: [
      { name: plan.hostVeth, mac: getLink(s.host, plan.hostVeth).mac, mtu },
      { name: plan.podIf, mac: getLink(s.pod, plan.podIf).mac, sandbox: netns, mtu },
    ],
    ips: [{ address: plan.podCidr, gateway: plan.podGateway, interface: 1 }],
    routes: plan.resultRoutes,
  };
}

/**
 * DEL: removes the pod's links (which take their addresses, routes and neighbours along)
 * and its host rules. Idempotent: a missing netns, link or rule is not an error. The rules
 * removed are those of the IP the host veth routes (read back while it still exists) and of
 * `address`, each only when no other attachment routes that IP. A link with one of
 * `cfg.eniMacs`, or of a kind the datapath never makes, is left alone; returns why, one
 * line per link. A pod netns that is the node's own is refused before anything changes.
 */
export function detachPod(cfg: DatapathConfig, pod: PodDetachment): string[] {
  validateDetachment(pod);
  refuseOwnNetns(pod.netns, "removing the pod's links from it");
  const hostVeth = hostVethName(cfg.hostVethPrefix, pod.containerId, pod.ifName);
  const eniMacs = macSet(cfg.eniMacs);
  const skipped: string[] = [];
  const host = NetlinkSocket.open();
  try {
    // What the kernel routes to this attachment's host link is what it really holds; the
    // address the caller names (a reservation, a prevResult) may be stale or another pod's.
    const ips = new Set<string>();
    const held = podIpOfHostVeth(host, hostVeth, eniMacs);
    if (held) ips.add(held);
    if (pod.address) ips.add(pod.address.ip);
    skipped.push(
      ...deletePodLinks(
        pod.netns,
        [pod.ifName, podTempName(pod.containerId, pod.ifName)],
        (p) => NetlinkSocket.openIn(p),
        eniMacs,
      ),
    );
    skipped.push(...deleteHostVeth(host, hostVeth, eniMacs));
    // Each IP's rules go only when no other attachment routes that IP any more.
    for (const ip of ips) deletePodRules(host, ip);
  } finally {
    host.close();
  }
  return skipped;
}

/**
 * CHECK: every object the attachment should have, and the host setup of its ENI; returns
 * one line per problem, [] when healthy. The kernel is read into a view and judged by the
 * comparator `vpcni doctor datapath` uses too (compare.ts).
 */
export function checkPod(config: DatapathConfig, pod: PodAttachment): string[] {
  validateConfig(config);
  validateAttachment(pod);
  if (!netnsExists(pod.netns)) return [`pod: netns ${pod.netns} does not exist`];
  return withSockets(pod.netns, (s) => {
    const view = { host: readNetnsView(s.host), pod: readNetnsView(s.pod) };
    const keys = podSysctlKeys(config, pod, view.host);
    view.host.sysctls = readSysctls(keys.host);
    view.pod.sysctls = readSysctls(keys.pod, s.netns);
    const eni = pod.address.eni;
    return [
      ...compareHostSysctls(view.host),
      ...(eni ? compareEni(config, eni, view.host) : []),
      ...comparePod(config, pod, view),
    ].map((f) => f.text);
  });
}

/**
 * Host setup, idempotent: forwarding on; with `eni`, its link up (MTU untouched) and its
 * table T(E) filled (primary ENI: main, nothing to add).
 */
export function prepareHost(cfg: DatapathConfig, eni?: DatapathEni): void {
  validateConfig(cfg);
  const host = NetlinkSocket.open();
  try {
    ensureHostSysctls();
    if (eni) ensureEni(host, cfg, eni);
  } finally {
    host.close();
  }
}

/**
 * The daemon's side of an ENI's host setup, when it attaches the ENI (and at start for those
 * attached already): as {@linkcode prepareHost}, but without waiting for the link. Returns
 * false, changing nothing, while no link on this node has the ENI's MAC (a hot-plugged device
 * the kernel has not registered yet: the daemon tries again on its next round). A pod's ADD
 * then finds the host side ready and only reads it.
 */
export function prepareEniHost(cfg: DatapathConfig, eni: DatapathEni): boolean {
  validateConfig(cfg);
  const host = NetlinkSocket.open();
  try {
    const link = findLinkByMac(host, eni.mac);
    if (!link) return false;
    ensureHostSysctls();
    ensureEni(host, cfg, eni, link);
    return true;
  } finally {
    host.close();
  }
}
