/**
 * Read-only snapshots of a network namespace through netlink/: links, addresses, routes
 * (every table), rules and neighbours, plus the sysctls the datapaths depend on. Plain
 * data, so the datapath check can compare it and the bundle can store it as JSON.
 *
 * @module
 */
import {
  type Address,
  type Link,
  listAddresses,
  listLinks,
  listNeighbours,
  listRoutes,
  listRules,
  type Neighbour,
  NetlinkSocket,
  netnsExists,
  readSysctl,
  type Route,
  type Rule,
} from "../netlink/mod.ts";

/** Everything doctor reads from one netns. */
export interface NetnsSnapshot {
  /** The netns path, or "" for doctor's own netns. */
  netns: string;
  links: Link[];
  addresses: Address[];
  routes: Route[];
  rules: Rule[];
  neighbours: Neighbour[];
}

/** Takes a snapshot of `netns` (a path), or of the calling thread's netns when "". */
export function snapshotNetns(netns = ""): NetnsSnapshot {
  const s = netns === "" ? NetlinkSocket.open() : NetlinkSocket.openIn(netns);
  try {
    return {
      netns,
      links: listLinks(s),
      addresses: listAddresses(s, { family: 4 }),
      routes: listRoutes(s, { family: 4 }),
      rules: listRules(s, 4),
      neighbours: listNeighbours(s, { family: 4 }),
    };
  } finally {
    s.close();
  }
}

/** True when a netns path exists and is a netns. */
export function podNetnsExists(path: string): boolean {
  try {
    return netnsExists(path);
  } catch {
    return false;
  }
}

/** Sysctls read for the datapath check, key → value (absent keys are left out). */
export function readSysctls(keys: string[], netns?: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of keys) {
    try {
      out[k] = readSysctl(k, netns).trim();
    } catch {
      // a link that went away, or a key this kernel lacks: reported as absent
    }
  }
  return out;
}

/** Sysctl keys that matter for the host: forwarding and rp_filter (all + each ENI link). */
export function hostSysctlKeys(links: Link[]): string[] {
  const keys = ["net.ipv4.ip_forward", "net.ipv4.conf.all.rp_filter"];
  for (const l of links) {
    if (l.name !== "lo") keys.push(`net.ipv4.conf.${l.name}.rp_filter`);
  }
  return keys;
}

/** Name of the link with ifindex `index` in a snapshot, or `#index`. */
export function linkName(snap: NetnsSnapshot, index: number | undefined): string {
  if (index === undefined) return "?";
  return snap.links.find((l) => l.index === index)?.name ?? `#${index}`;
}
