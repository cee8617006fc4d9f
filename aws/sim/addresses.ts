/**
 * A subnet's address book: AWS reserves the first four addresses and the last one; free
 * addresses and aligned /28 blocks are handed out next-fit from a cursor, so a freed
 * address is not reused at once (as in AWS).
 *
 * @module
 */
import type { EniState, SubnetState } from "./model.ts";
import { cidrSize, parseIpv4, parseIpv4Network } from "../../base/ipv4.ts";
import { SimError } from "./errors.ts";

/** True for the five addresses AWS reserves in every subnet. */
export function isReserved(s: SubnetState, ip: number): boolean {
  return ip < s.cidr.address + 4 || ip === s.cidr.address + cidrSize(s.cidr) - 1;
}

/** Free addresses of a subnet, as DescribeSubnets reports them. */
export function availableIps(s: SubnetState): number {
  return cidrSize(s.cidr) - 5 - s.used.size;
}

/** Throws InsufficientFreeAddressesInSubnet. */
export function insufficient(): never {
  throw new SimError(
    "InsufficientFreeAddressesInSubnet",
    "The specified subnet does not have enough free addresses to satisfy the request.",
  );
}

/** Picks `n` free addresses next-fit from the subnet's cursor; does not mark them used. */
export function pickIps(s: SubnetState, n: number): number[] {
  if (n === 0) return [];
  const first = s.cidr.address + 4, last = s.cidr.address + cidrSize(s.cidr) - 2;
  const out: number[] = [];
  let ip = s.ipCursor;
  for (let scanned = 0; scanned <= last - first && out.length < n; scanned++) {
    if (ip > last || ip < first) ip = first;
    if (!s.used.has(ip)) out.push(ip);
    ip++;
  }
  if (out.length < n) insufficient();
  s.ipCursor = ip;
  return out;
}

/** Picks `n` free aligned /28 blocks; does not mark them used. */
export function pickPrefixes(s: SubnetState, n: number): number[] {
  if (n === 0) return [];
  const blocks = cidrSize(s.cidr) / 16;
  const out: number[] = [];
  let b = Math.floor((s.prefixCursor - s.cidr.address) / 16);
  for (let scanned = 0; scanned < blocks && out.length < n; scanned++, b++) {
    if (b >= blocks) b = 0;
    const base = s.cidr.address + b * 16;
    let free = true;
    for (let k = 0; k < 16 && free; k++) {
      if (s.used.has(base + k) || isReserved(s, base + k)) free = false;
    }
    if (free) out.push(base);
  }
  if (out.length < n) {
    throw new SimError(
      "InsufficientCidrBlocks",
      "The specified subnet does not have enough free cidr blocks to satisfy the request.",
    );
  }
  s.prefixCursor = s.cidr.address + (b % blocks) * 16;
  return out;
}

/** Returns every address of the ENI to its subnet. */
export function releaseAddresses(s: SubnetState, eni: EniState): void {
  for (const x of eni.privateIps) s.used.delete(parseIpv4(x.address)!);
  for (const px of eni.prefixes) {
    const c = parseIpv4Network(px.cidr)!;
    for (let k = 0; k < 16; k++) s.used.delete(c.address + k);
  }
}
