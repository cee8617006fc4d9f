/**
 * IPv4 addresses and CIDR blocks as unsigned 32-bit numbers: parsing, formatting and block
 * arithmetic. It imports nothing, so the CNI plugin's hot path and the EC2 simulator can
 * both load it without pulling in FFI or npm code.
 *
 * Two CIDR parsers read two kinds of text: {@linkcode parseIpv4Cidr} takes an address with
 * its prefix length as written ("10.0.1.7/24", the way an interface address is given), and
 * {@linkcode parseIpv4Network} takes only a network block whose host bits are zero
 * ("10.0.1.0/24", the way a VPC or subnet is given).
 *
 * @module
 */

/** An IPv4 address and prefix length; the address is not necessarily the network's. */
export interface Ipv4Cidr {
  /** The address as an unsigned 32-bit number. */
  address: number;
  /** Prefix length, 0 to 32. */
  prefixLen: number;
}

/**
 * Parses a dotted-quad IPv4 address into an unsigned 32-bit number. Each octet is decimal
 * without leading zeros; shorthand forms ("10.1") are refused.
 *
 * @returns the address, or undefined when `text` is not one.
 */
export function parseIpv4(text: string): number | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  let n = 0;
  for (const p of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return undefined;
    const octet = Number(p);
    if (octet > 255) return undefined;
    n = n * 256 + octet;
  }
  return n;
}

/** Formats an unsigned 32-bit number as a dotted-quad IPv4 address. */
export function formatIpv4(n: number): string {
  return `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
}

/** True when `text` is a dotted-quad IPv4 address that {@linkcode parseIpv4} accepts. */
export function isIpv4(text: string): boolean {
  return parseIpv4(text) !== undefined;
}

/**
 * Parses "a.b.c.d/len" keeping the address as written, host bits and all; a bare address
 * is a /32. The length is decimal without leading zeros.
 *
 * @returns the CIDR, or undefined when `text` is not one.
 */
export function parseIpv4Cidr(text: string): Ipv4Cidr | undefined {
  const slash = text.indexOf("/");
  const address = parseIpv4(slash < 0 ? text : text.slice(0, slash));
  if (address === undefined) return undefined;
  if (slash < 0) return { address, prefixLen: 32 };
  const lenText = text.slice(slash + 1);
  if (!/^(0|[1-9][0-9]?)$/.test(lenText) || Number(lenText) > 32) return undefined;
  return { address, prefixLen: Number(lenText) };
}

/**
 * Parses a network block "a.b.c.d/len": the length is required and every host bit must be
 * zero, so "10.0.1.7/24" is refused. The length is one or two decimal digits; the EC2
 * simulator has always read "/08" as /8, and scenario files written that way keep loading.
 *
 * @returns the block, or undefined when `text` is not one.
 */
export function parseIpv4Network(text: string): Ipv4Cidr | undefined {
  const slash = text.indexOf("/");
  if (slash < 0) return undefined;
  const address = parseIpv4(text.slice(0, slash));
  const lenText = text.slice(slash + 1);
  if (address === undefined || !/^[0-9]{1,2}$/.test(lenText)) return undefined;
  const prefixLen = Number(lenText);
  if (prefixLen > 32) return undefined;
  const block = { address, prefixLen };
  return cidrNetwork(block).address === address ? block : undefined;
}

/** Formats a CIDR as "a.b.c.d/len", with the address as it is held. */
export function formatIpv4Cidr(c: Ipv4Cidr): string {
  return `${formatIpv4(c.address)}/${c.prefixLen}`;
}

/** The netmask of a prefix length as an unsigned 32-bit number (24 → 255.255.255.0). */
export function prefixMask(prefixLen: number): number {
  return prefixLen === 0 ? 0 : (0xffffffff << (32 - prefixLen)) >>> 0;
}

/** The network block a CIDR lies in: its address with the host bits cleared. */
export function cidrNetwork(c: Ipv4Cidr): Ipv4Cidr {
  return { address: (c.address & prefixMask(c.prefixLen)) >>> 0, prefixLen: c.prefixLen };
}

/** How many addresses a block holds: 2^(32 - prefix length). */
export function cidrSize(c: Ipv4Cidr): number {
  return 2 ** (32 - c.prefixLen);
}

/** Every address of a CIDR's network block in ascending order, network address first. */
export function cidrAddresses(c: Ipv4Cidr): number[] {
  const first = cidrNetwork(c).address;
  return Array.from({ length: cidrSize(c) }, (_, i) => first + i);
}

/** True when `ip` lies inside the network block of `c`. */
export function cidrContains(c: Ipv4Cidr, ip: number): boolean {
  return ((c.address ^ ip) & prefixMask(c.prefixLen)) === 0;
}

/** True when the network block of `inner` lies entirely inside that of `outer`. */
export function cidrWithin(inner: Ipv4Cidr, outer: Ipv4Cidr): boolean {
  return inner.prefixLen >= outer.prefixLen && cidrContains(outer, inner.address);
}

/** True when the network blocks of `a` and `b` share at least one address. */
export function cidrOverlaps(a: Ipv4Cidr, b: Ipv4Cidr): boolean {
  // Two blocks either nest or are disjoint, so the shorter prefix decides.
  return ((a.address ^ b.address) & prefixMask(Math.min(a.prefixLen, b.prefixLen))) === 0;
}

/**
 * A route or rule destination in the form netlink/ reports it, so that wanted and present
 * routes compare as strings: "default" for a /0, otherwise the network block ("10.0.1.7/24"
 * → "10.0.1.0/24", "10.0.1.7" → "10.0.1.7/32"). Text that is not an IPv4 CIDR comes back
 * unchanged.
 */
export function canonicalDst(text: string): string {
  if (text === "default") return text;
  const c = parseIpv4Cidr(text);
  if (!c) return text;
  return c.prefixLen === 0 ? "default" : formatIpv4Cidr(cidrNetwork(c));
}
