/**
 * Which subnets a pool may use, and which one a new ENI goes into: among matching subnets
 * in the node's AZ that have room, a random pick weighted by free addresses, so that many
 * nodes starting together spread over the subnets instead of draining the emptiest one.
 *
 * @module
 */
import type { SubnetInfo } from "./cloud.ts";
import type { SubnetChoice } from "./config.ts";
import { matchesTags } from "./selector.ts";
import { cidrAddresses, cidrNetwork, formatIpv4, parseIpv4Cidr } from "../base/ipv4.ts";

/** Subnets a selector matches, restricted to the node's VPC subnets in its AZ. */
export function matchSubnets(
  choice: SubnetChoice,
  subnets: SubnetInfo[],
  node: { az: string; primarySubnetId: string },
): SubnetInfo[] {
  const inAz = subnets.filter((s) => s.az === node.az);
  switch (choice.kind) {
    case "node":
      return inAz.filter((s) => s.id === node.primarySubnetId);
    case "ids":
      return inAz.filter((s) => choice.ids.includes(s.id));
    case "tags":
      return inAz.filter((s) => matchesTags(choice.selector, s.tags));
  }
}

/**
 * Picks a subnet for a new ENI, weighted by free addresses. `minFree` is how many
 * addresses the new ENI needs at least (its own primary plus one). Returns undefined when
 * no candidate has room.
 */
export function pickSubnet(
  candidates: SubnetInfo[],
  o: { minFree: number; exclude?: Set<string>; random?: () => number },
): SubnetInfo | undefined {
  const open = candidates.filter((s) => s.availableIps >= o.minFree && !o.exclude?.has(s.id));
  if (open.length === 0) return undefined;
  const total = open.reduce((n, s) => n + s.availableIps, 0);
  let r = (o.random ?? Math.random)() * total;
  for (const s of open) {
    r -= s.availableIps;
    if (r < 0) return s;
  }
  return open[open.length - 1];
}

/**
 * The gateway of an IPv4 subnet: its first usable address (network + 1), where the VPC
 * router answers. A CIDR that does not parse gives "", and the plugin, which checks the
 * subnet CIDR before the gateway, then names the CIDR as what is wrong.
 */
export function subnetGateway(cidr: string): string {
  const c = parseIpv4Cidr(cidr);
  return c ? formatIpv4(cidrNetwork(c).address + 1) : "";
}

/**
 * Every address of a delegated prefix such as `10.0.1.16/28` (16 of them), network address
 * first. A prefix that does not parse holds no addresses.
 */
export function prefixAddresses(prefix: string): string[] {
  const c = parseIpv4Cidr(prefix);
  return c ? cidrAddresses(c).map(formatIpv4) : [];
}

/** Addresses pods may get from an ENI: its secondary IPs and every address of its prefixes. */
export function podAddresses(secondaryIps: string[], prefixes: string[]): Set<string> {
  const ips = new Set(secondaryIps);
  for (const p of prefixes) for (const ip of prefixAddresses(p)) ips.add(ip);
  return ips;
}
