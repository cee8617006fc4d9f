/**
 * IPv4 address and CIDR helpers for the datapath: strict parsing (no leading zeros, no
 * shorthand), canonical formatting, network arithmetic. No npm imports.
 *
 * @module
 */

/** Parses dotted-quad IPv4 into a 32-bit unsigned number, or undefined when malformed. */
export function parseIpv4(s: string): number | undefined {
  const parts = s.split(".");
  if (parts.length !== 4) return undefined;
  let n = 0;
  for (const p of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return undefined;
    const v = Number(p);
    if (v > 255) return undefined;
    n = n * 256 + v;
  }
  return n;
}

/** Formats a 32-bit unsigned number as dotted-quad IPv4. */
export function formatIpv4(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
}

/** True when `s` is a well-formed IPv4 address. */
export function isIpv4(s: string): boolean {
  return parseIpv4(s) !== undefined;
}

/** A parsed IPv4 CIDR. */
export interface Ipv4Cidr {
  /** The address as written (not necessarily the network address). */
  address: number;
  prefixLen: number;
}

/** Parses "a.b.c.d/n" (a bare address counts as /32), or undefined when malformed. */
export function parseCidr(s: string): Ipv4Cidr | undefined {
  const slash = s.indexOf("/");
  const addr = parseIpv4(slash < 0 ? s : s.slice(0, slash));
  if (addr === undefined) return undefined;
  if (slash < 0) return { address: addr, prefixLen: 32 };
  const len = s.slice(slash + 1);
  if (!/^(0|[1-9][0-9]?)$/.test(len) || Number(len) > 32) return undefined;
  return { address: addr, prefixLen: Number(len) };
}

/** The netmask of a prefix length as a 32-bit unsigned number. */
export function maskOf(prefixLen: number): number {
  return prefixLen === 0 ? 0 : (0xffffffff << (32 - prefixLen)) >>> 0;
}

/** The canonical network CIDR of a CIDR ("10.0.1.7/24" → "10.0.1.0/24"). */
export function networkCidr(c: Ipv4Cidr): string {
  return `${formatIpv4((c.address & maskOf(c.prefixLen)) >>> 0)}/${c.prefixLen}`;
}

/** True when `ip` lies inside `cidr`. */
export function cidrContains(cidr: Ipv4Cidr, ip: number): boolean {
  const m = maskOf(cidr.prefixLen);
  return ((cidr.address & m) >>> 0) === ((ip & m) >>> 0);
}

/**
 * Canonical form of a route/rule destination as netlink/ reports it: "default" for /0,
 * "a.b.c.d/n" with the host bits cleared otherwise.
 */
export function canonicalDst(s: string): string {
  if (s === "default") return s;
  const c = parseCidr(s);
  if (!c) return s;
  return c.prefixLen === 0 ? "default" : networkCidr(c);
}
