/**
 * What the datapath must never touch, checked before it touches anything: the netns the
 * plugin runs in treated as a pod's, a link that is one of the node's ENIs (in any netns),
 * a link of a kind the datapath never makes, and addresses no pod may have.
 *
 * @module
 */
import { listAddresses, type NetlinkSocket } from "../../netlink/mod.ts";
import {
  cidrContains,
  cidrNetwork,
  formatIpv4,
  parseIpv4,
  parseIpv4Cidr,
} from "../../base/ipv4.ts";
import { DatapathInputError } from "./errors.ts";
import { netnsOpenPath } from "../../base/netns_alias.ts";

/**
 * The node-side namespaces no pod may be: the calling thread's (where the host side is
 * built), the process's (its main thread may sit elsewhere), and PID 1's (the node's root
 * netns, seen from the plugin's PID namespace).
 */
const NODE_NETNS = ["/proc/thread-self/ns/net", "/proc/self/ns/net", "/proc/1/ns/net"];

/** (device, inode) of the namespace a path names, following the symlink; undefined if none. */
function nsIdentity(path: string): string | undefined {
  try {
    const st = Deno.statSync(path);
    return `${st.dev}:${st.ino}`;
  } catch {
    return undefined;
  }
}

/**
 * True when `netns` names a network namespace of the node side: the one the plugin runs in,
 * its process's or PID 1's. Compared by inode, so `/proc/self/ns/net`, `/proc/<pid>/ns/net`
 * and a bind mount of it all count.
 */
export function isOwnNetns(netns: string): boolean {
  const other = nsIdentity(netnsOpenPath(netns));
  if (other === undefined) return false;
  return NODE_NETNS.some((p) => nsIdentity(p) === other);
}

/** Refuses a pod netns that is the plugin's own netns: its links are the node's. */
export function refuseOwnNetns(netns: string | undefined, verb: string): void {
  if (netns && isOwnNetns(netns)) {
    throw new DatapathInputError(
      `netns ${netns} is the node's own network namespace, not a pod's; ${verb} would change ` +
        "the node's links, addresses and routes, so nothing was done",
    );
  }
}

/** Link kinds the datapath creates; it never deletes a link of another kind. */
export const OWN_LINK_KINDS: readonly string[] = ["veth", "ipvlan"];

/** Lower-cases a MAC list into a set. */
export function macSet(macs: readonly string[] | undefined): Set<string> {
  return new Set((macs ?? []).map((m) => m.toLowerCase()));
}

/**
 * Why the datapath must leave a link alone, or undefined when it may delete it: an ENI's
 * MAC, or a kind the datapath never makes (a physical NIC has none). An ipvlan slave shares
 * its parent ENI's MAC by design and is never an ENI itself: its MAC says nothing.
 */
export function untouchableReason(
  link: { name: string; kind?: string; mac: string },
  eniMacs: Set<string>,
): string | undefined {
  if (link.kind !== "ipvlan" && link.mac && eniMacs.has(link.mac.toLowerCase())) {
    return `link ${link.name} has MAC ${link.mac}, which is one of the node's ENIs`;
  }
  if (!link.kind || !OWN_LINK_KINDS.includes(link.kind)) {
    return `link ${link.name} is ${link.kind ? `a ${link.kind}` : "a physical device"}, ` +
      `not a ${OWN_LINK_KINDS.join(" or ")} the datapath makes`;
  }
  return undefined;
}

const SPECIAL_RANGES: [string, string][] = [
  ["0.0.0.0/8", "an address of 'this network' (0.0.0.0/8)"],
  ["127.0.0.0/8", "a loopback address (127.0.0.0/8)"],
  ["169.254.0.0/16", "a link-local address (169.254.0.0/16)"],
  ["224.0.0.0/4", "a multicast address (224.0.0.0/4)"],
  ["240.0.0.0/4", "a reserved address (240.0.0.0/4)"],
];

/**
 * Why no pod may have `ip` with `prefixLen`, or undefined when it may: loopback, "this
 * network", link-local, multicast, reserved and limited broadcast, and the network or
 * broadcast address of its own subnet (for prefixes up to /30).
 */
export function unusableAddressReason(ip: string, prefixLen: number): string | undefined {
  const n = parseIpv4(ip);
  if (n === undefined) return `${ip} is not an IPv4 address`;
  if (ip === "255.255.255.255") return "the limited broadcast address";
  for (const [cidr, what] of SPECIAL_RANGES) {
    if (cidrContains(parseIpv4Cidr(cidr)!, n)) return what;
  }
  if (prefixLen >= 1 && prefixLen <= 30) {
    const net = cidrNetwork({ address: n, prefixLen });
    const size = 2 ** (32 - prefixLen);
    const broadcast = (net.address + size - 1) >>> 0;
    const subnet = `${formatIpv4(net.address)}/${prefixLen}`;
    if (n === net.address) return `the network address of ${subnet}`;
    if (n === broadcast) return `the broadcast address of ${subnet}`;
  }
  return undefined;
}

/** True when `ip` is one of the node's own addresses (any link of the host netns). */
export function isNodeAddress(host: NetlinkSocket, ip: string): boolean {
  return listAddresses(host, { family: 4 }).some((a) => a.address === ip);
}
