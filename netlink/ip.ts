/**
 * IPv4/IPv6 addresses, CIDRs and MAC addresses: strict parsing into wire bytes and
 * formatting back the way iproute2 prints them. Bad text throws {@linkcode InvalidInputError}.
 *
 * @module
 */

import { InvalidInputError } from "./errors.ts";
import { parseIpv4 } from "../base/ipv4.ts";

/** An address family as netlink/ spells it. */
export type Family = 4 | 6;

/** A parsed IP address. */
export interface ParsedIp {
  /** 4 or 6. */
  family: Family;
  /** Network-order bytes (4 or 16). */
  bytes: Uint8Array;
}

/** A parsed CIDR: address (host bits kept as given) and prefix length. */
export interface ParsedCidr extends ParsedIp {
  /** Prefix length. */
  prefixLen: number;
}

/** AF_INET */
export const AF_INET = 2;
/** AF_INET6 */
export const AF_INET6 = 10;

/** The kernel's AF_* for a family. */
export function afOf(family: Family): number {
  return family === 4 ? AF_INET : AF_INET6;
}

/** The family for a kernel AF_*, or undefined for others. */
export function familyOfAf(af: number): Family | undefined {
  return af === AF_INET ? 4 : af === AF_INET6 ? 6 : undefined;
}

function parseV4(s: string): Uint8Array | undefined {
  const n = parseIpv4(s);
  return n === undefined ? undefined : new Uint8Array([n >>> 24, n >>> 16, n >>> 8, n]);
}

function parseV6(s: string): Uint8Array | undefined {
  if (!/^[0-9a-fA-F:.]+$/.test(s)) return undefined;
  const halves = s.split("::");
  if (halves.length > 2) return undefined;
  const groups = (h: string): number[] | undefined => {
    if (h === "") return [];
    const out: number[] = [];
    const parts = h.split(":");
    for (let i = 0; i < parts.length; i++) {
      const p = parts[i];
      if (i === parts.length - 1 && p.includes(".")) {
        const v4 = parseV4(p);
        if (!v4) return undefined;
        out.push((v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]);
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(p)) return undefined;
        out.push(parseInt(p, 16));
      }
    }
    return out;
  };
  const head = groups(halves[0]);
  const tail = halves.length === 2 ? groups(halves[1]) : [];
  if (!head || !tail) return undefined;
  // A v4 tail is only allowed at the very end.
  if (halves.length === 2 && halves[0].includes(".")) return undefined;
  const total = head.length + tail.length;
  if (halves.length === 1 ? total !== 8 : total > 7) return undefined;
  const all = [...head, ...new Array(8 - total).fill(0), ...tail];
  const out = new Uint8Array(16);
  all.forEach((g, i) => {
    out[i * 2] = g >> 8;
    out[i * 2 + 1] = g & 0xff;
  });
  return out;
}

/** Parses an IPv4 or IPv6 address, e.g. "10.0.0.5" or "fd00::1". */
export function parseIp(s: string, what = "IP address"): ParsedIp {
  const v4 = parseV4(s);
  if (v4) return { family: 4, bytes: v4 };
  const v6 = s.includes(":") ? parseV6(s) : undefined;
  if (v6) return { family: 6, bytes: v6 };
  throw new InvalidInputError(`invalid ${what} ${JSON.stringify(s)}: expected IPv4 or IPv6`);
}

/**
 * Parses "addr/len". A bare address is a host route (/32 or /128) only when `allowBare`.
 */
export function parseCidr(s: string, allowBare = false, what = "CIDR"): ParsedCidr {
  const slash = s.indexOf("/");
  if (slash < 0) {
    if (!allowBare) {
      throw new InvalidInputError(
        `invalid ${what} ${JSON.stringify(s)}: expected address/prefix, e.g. 10.0.0.5/32`,
      );
    }
    const ip = parseIp(s, what);
    return { ...ip, prefixLen: ip.family === 4 ? 32 : 128 };
  }
  const ip = parseIp(s.slice(0, slash), what);
  const lenText = s.slice(slash + 1);
  const max = ip.family === 4 ? 32 : 128;
  if (!/^(0|[1-9][0-9]{0,2})$/.test(lenText) || Number(lenText) > max) {
    throw new InvalidInputError(
      `invalid ${what} ${JSON.stringify(s)}: prefix length must be 0..${max}`,
    );
  }
  return { ...ip, prefixLen: Number(lenText) };
}

/** Formats address bytes (4 or 16) as iproute2 prints them (RFC 5952 for IPv6). */
export function formatIp(b: Uint8Array): string {
  if (b.length === 4) return `${b[0]}.${b[1]}.${b[2]}.${b[3]}`;
  if (b.length !== 16) throw new Error(`address of ${b.length} bytes`);
  const g: number[] = [];
  for (let i = 0; i < 16; i += 2) g.push((b[i] << 8) | b[i + 1]);
  // Longest run of zero groups (length >= 2) becomes "::"; the first wins a tie.
  let best = -1, bestLen = 0;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j;
  }
  if (bestLen < 2) best = -1;
  // IPv4-mapped and IPv4-compatible forms, as inet_ntop prints them.
  if (best === 0 && (bestLen === 6 || (bestLen === 5 && g[5] === 0xffff))) {
    const prefix = bestLen === 5 ? "::ffff:" : "::";
    return `${prefix}${b[12]}.${b[13]}.${b[14]}.${b[15]}`;
  }
  const hex = (a: number[]) => a.map((x) => x.toString(16)).join(":");
  if (best < 0) return hex(g);
  return `${hex(g.slice(0, best))}::${hex(g.slice(best + bestLen))}`;
}

/** Parses a MAC address "aa:bb:cc:dd:ee:ff" (case-insensitive). */
export function parseMac(s: string): Uint8Array {
  if (!/^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$/.test(s)) {
    throw new InvalidInputError(
      `invalid MAC address ${JSON.stringify(s)}: expected six hex octets like 02:00:00:00:00:01`,
    );
  }
  return new Uint8Array(s.split(":").map((h) => parseInt(h, 16)));
}

/** Formats a hardware address as lower-case colon-separated hex. */
export function formatMac(b: Uint8Array): string {
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join(":");
}
