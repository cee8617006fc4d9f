/**
 * What the datapath comparator (compare.ts) reads the kernel through: a plain-data view of
 * one network namespace. CHECK reads it live from its netlink sockets; `vpcni doctor` takes
 * the same shape as its snapshot (and stores it as JSON in a bundle), so both are judged by
 * one comparator.
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
  type NetlinkSocket,
  readSysctl,
  type Route,
  type Rule,
} from "../../netlink/mod.ts";

/** The objects of one netns that a pod's datapath consists of (IPv4 only). */
export interface NetnsView {
  links: Link[];
  addresses: Address[];
  /** Every table's routes. */
  routes: Route[];
  rules: Rule[];
  neighbours: Neighbour[];
  /**
   * Sysctls read in this netns, key → value, in the key form the comparator asks for. A key
   * left out was not read (or does not exist): it is not judged.
   */
  sysctls?: Record<string, string>;
}

/** The host's view and, while its netns exists, the pod's. */
export interface KernelView {
  host: NetnsView;
  pod?: NetnsView;
}

/** Reads a view of the netns `s` is bound to (links, addresses, routes, rules, neighbours). */
export function readNetnsView(s: NetlinkSocket): NetnsView {
  return {
    links: listLinks(s),
    addresses: listAddresses(s, { family: 4 }),
    routes: listRoutes(s, { family: 4 }),
    rules: listRules(s, 4),
    neighbours: listNeighbours(s, { family: 4 }),
  };
}

/**
 * Reads sysctls, key → value; a key that cannot be read (a link that went away, a key this
 * kernel lacks) is left out. `netns` is a netns path, or absent for the caller's own.
 */
export function readSysctls(keys: Iterable<string>, netns?: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of keys) {
    try {
      out[k] = readSysctl(k, netns).trim();
    } catch {
      // left out: not judged
    }
  }
  return out;
}
