/**
 * IPv4 address and CIDR arithmetic for the simulator (addresses as unsigned 32-bit numbers).
 *
 * @module
 */

/** A parsed IPv4 CIDR block: network address, prefix length and size. */
export interface Cidr {
  /** Network address as an unsigned 32-bit number. */
  base: number;
  prefix: number;
  /** Number of addresses in the block. */
  size: number;
}

/** Parses a dotted-quad IPv4 address; undefined when it is not one. */
export function parseIp(text: string): number | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (!m) return undefined;
  let n = 0;
  for (let i = 1; i <= 4; i++) {
    const octet = Number(m[i]);
    if (octet > 255 || (m[i].length > 1 && m[i][0] === "0")) return undefined;
    n = n * 256 + octet;
  }
  return n;
}

/** Formats an unsigned 32-bit number as a dotted quad. */
export function formatIp(n: number): string {
  return `${(n >>> 24) & 255}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
}

/** Parses `a.b.c.d/len` whose host bits are zero; undefined when it is not one. */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf("/");
  if (slash < 0) return undefined;
  const base = parseIp(text.slice(0, slash));
  const lenText = text.slice(slash + 1);
  if (base === undefined || !/^\d{1,2}$/.test(lenText)) return undefined;
  const prefix = Number(lenText);
  if (prefix > 32) return undefined;
  const size = 2 ** (32 - prefix);
  if (base % size !== 0) return undefined;
  return { base, prefix, size };
}

/** Formats a CIDR as `a.b.c.d/len`. */
export function formatCidr(c: Cidr): string {
  return `${formatIp(c.base)}/${c.prefix}`;
}

/** True when the address lies inside the block. */
export function cidrContains(c: Cidr, ip: number): boolean {
  return ip >= c.base && ip < c.base + c.size;
}

/** True when `inner` lies entirely inside `outer`. */
export function cidrWithin(inner: Cidr, outer: Cidr): boolean {
  return inner.base >= outer.base && inner.base + inner.size <= outer.base + outer.size;
}

/** True when the two blocks share at least one address. */
export function cidrOverlaps(a: Cidr, b: Cidr): boolean {
  return a.base < b.base + b.size && b.base < a.base + a.size;
}
