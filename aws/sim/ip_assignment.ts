/**
 * Assigning and unassigning secondary private IPs and /28 prefixes on an ENI, with EC2's
 * limits (addresses per ENI of the attached instance type, prefixes on Nitro only) and
 * all-or-nothing commits.
 *
 * @module
 */
import {
  cidrContains,
  cidrWithin,
  formatIpv4,
  formatIpv4Cidr,
  parseIpv4,
  parseIpv4Network,
} from "../../base/ipv4.ts";
import { invalidCount, invalidValueThrow, SimError } from "./errors.ts";
import { insufficient, isReserved, pickIps, pickPrefixes } from "./addresses.ts";
import type { AssignParams, EniState, SubnetState } from "./model.ts";
import type { SimState } from "./state.ts";

/** AssignPrivateIpAddresses; returns what was assigned. */
export function assignPrivateIps(
  state: SimState,
  eniId: string,
  p: AssignParams,
): { ips: string[]; prefixes: string[] } {
  const eni = state.eni(eniId);
  const subnet = state.subnet(eni.subnetId);
  const count = p.count ?? 0;
  const explicit = p.ips ?? [];
  const prefixCount = p.prefixCount ?? 0;
  const explicitPrefixes = p.prefixes ?? [];
  if (count < 0 || prefixCount < 0) invalidCount();
  const wantIps = count > 0 || explicit.length > 0;
  const wantPrefixes = prefixCount > 0 || explicitPrefixes.length > 0;
  if (!wantIps && !wantPrefixes) {
    throw new SimError(
      "MissingParameter",
      "Either SecondaryPrivateIpAddressCount, PrivateIpAddress, Ipv4PrefixCount or Ipv4Prefix must be specified",
    );
  }
  if (
    (count > 0 && explicit.length > 0) || (prefixCount > 0 && explicitPrefixes.length > 0) ||
    (wantIps && wantPrefixes)
  ) {
    throw new SimError(
      "InvalidParameterCombination",
      "Only one of the IP or prefix parameters may be specified",
    );
  }
  const inst = eni.attachment ? state.instances.get(eni.attachment.instanceId) : undefined;
  const adding = count + explicit.length + prefixCount + explicitPrefixes.length;
  if (inst) {
    if (wantPrefixes && inst.limits.hypervisor !== "nitro") {
      invalidValueThrow(
        `Prefix delegation is not supported on instance type ${inst.limits.type}`,
      );
    }
    if (eni.privateIps.length + eni.prefixes.length + adding > inst.limits.ipv4PerEni) {
      throw new SimError(
        "PrivateIpAddressLimitExceeded",
        "Number of private addresses will exceed limit.",
      );
    }
  }
  const now = Date.now();
  const ips: number[] = [];
  for (const text of explicit) {
    const ip = checkExplicitIp(state, subnet, text, p.allowReassignment ? eni : undefined);
    if (ips.includes(ip)) invalidValueThrow(`Address ${text} is given twice`);
    ips.push(ip);
  }
  if (count > 0) {
    if (state.availableIps(subnet) < count) insufficient();
    ips.push(...pickIps(subnet, count));
  }
  const prefixes: number[] = [];
  for (const text of explicitPrefixes) {
    const c = parseIpv4Network(text);
    if (!c || c.prefixLen !== 28 || !cidrWithin(c, subnet.cidr)) {
      invalidValueThrow(`Prefix ${text} is not a /28 inside ${formatIpv4Cidr(subnet.cidr)}`);
    }
    for (let k = 0; k < 16; k++) {
      if (subnet.used.has(c!.address + k) || isReserved(subnet, c!.address + k)) {
        throw new SimError("InvalidParameterValue", `Prefix ${text} overlaps addresses in use`);
      }
    }
    prefixes.push(c!.address);
  }
  if (prefixCount > 0) prefixes.push(...pickPrefixes(subnet, prefixCount));
  // Commit.
  for (const ip of ips) {
    const holder = holderOf(state, ip, eni.subnetId);
    if (holder && holder !== eni) {
      holder.privateIps = holder.privateIps.filter((x) => x.address !== formatIpv4(ip));
      state.emit({ kind: "unassign", eniId: holder.id });
    }
    subnet.used.add(ip);
    eni.privateIps.push({ address: formatIpv4(ip), primary: false, assignedAt: now });
  }
  for (const b of prefixes) {
    for (let k = 0; k < 16; k++) subnet.used.add(b + k);
    eni.prefixes.push({ cidr: `${formatIpv4(b)}/28`, assignedAt: now });
  }
  state.emit({ kind: "assign", eniId });
  return { ips: ips.map(formatIpv4), prefixes: prefixes.map((b) => `${formatIpv4(b)}/28`) };
}

/** UnassignPrivateIpAddresses (IPs and/or prefixes). */
export function unassignPrivateIps(
  state: SimState,
  eniId: string,
  p: { ips?: string[]; prefixes?: string[] },
): void {
  const eni = state.eni(eniId);
  const subnet = state.subnet(eni.subnetId);
  const ips = p.ips ?? [];
  const prefixes = p.prefixes ?? [];
  if (ips.length === 0 && prefixes.length === 0) {
    throw new SimError(
      "MissingParameter",
      "Either PrivateIpAddress or Ipv4Prefix must be specified",
    );
  }
  for (const ip of ips) {
    const rec = eni.privateIps.find((x) => x.address === ip);
    if (!rec) {
      invalidValueThrow(`Some of the specified addresses are not assigned to interface ${eniId}`);
    }
    if (rec!.primary) {
      invalidValueThrow("The primary IP address of an interface cannot be unassigned.");
    }
  }
  for (const px of prefixes) {
    if (!eni.prefixes.some((x) => x.cidr === px)) {
      invalidValueThrow(`Some of the specified prefixes are not assigned to interface ${eniId}`);
    }
  }
  eni.privateIps = eni.privateIps.filter((x) => !ips.includes(x.address));
  for (const ip of ips) subnet.used.delete(parseIpv4(ip)!);
  eni.prefixes = eni.prefixes.filter((x) => !prefixes.includes(x.cidr));
  for (const px of prefixes) {
    const c = parseIpv4Network(px)!;
    for (let k = 0; k < 16; k++) subnet.used.delete(c.address + k);
  }
  state.emit({ kind: "unassign", eniId });
}

/** Checks an explicitly requested address: in the subnet, not reserved, free (or movable). */
export function checkExplicitIp(
  state: SimState,
  s: SubnetState,
  text: string,
  reassignTo?: EniState,
): number {
  const ip = parseIpv4(text);
  if (ip === undefined) invalidValueThrow(`Invalid IPv4 address: ${text}`);
  if (!cidrContains(s.cidr, ip!)) {
    invalidValueThrow(`Address ${text} does not fall within the subnet's address range`);
  }
  if (isReserved(s, ip!)) {
    invalidValueThrow(`Address ${text} is reserved by AWS in ${formatIpv4Cidr(s.cidr)}`);
  }
  if (s.used.has(ip!)) {
    const holder = holderOf(state, ip!, s.id);
    const movable = reassignTo && holder && holder !== reassignTo &&
      holder.privateIps.some((x) => x.address === text && !x.primary);
    if (!movable) throw new SimError("InvalidIPAddress.InUse", `Address ${text} is in use.`);
  }
  return ip!;
}

/** The ENI holding an address of a subnet as a private IP. */
export function holderOf(state: SimState, ip: number, subnetId: string): EniState | undefined {
  const text = formatIpv4(ip);
  for (const e of state.enis.values()) {
    if (e.subnetId === subnetId && e.privateIps.some((x) => x.address === text)) return e;
  }
  return undefined;
}
