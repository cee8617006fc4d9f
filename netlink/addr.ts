/**
 * Interface addresses (IPv4 and IPv6): add, delete, list.
 *
 * @module
 */

import {
  getString,
  MessageBuilder,
  type NetlinkMessage,
  NLM_F_CREATE,
  NLM_F_DUMP,
  NLM_F_EXCL,
  parseAttrs,
  RTM,
} from "./codec.ts";
import { afOf, type Family, familyOfAf, formatIp, parseCidr } from "./ip.ts";
import { linkFamilyFilter, linkIndex, type LinkRef } from "./link.ts";
import { scopeName, scopeNumber } from "./scope.ts";
import type { NetlinkSocket } from "./socket.ts";
import { checkIfName } from "./validate.ts";

/** An address on a link. */
export interface Address {
  /** ifindex of the link. */
  index: number;
  /** 4 or 6. */
  family: Family;
  /** The address, without the prefix length. */
  address: string;
  /** Prefix length. */
  prefixLen: number;
  /** "universe" (iproute2's "global"), "link", "host", "site" or "nowhere". */
  scope: string;
  /** IPv4 label (usually the link name). */
  label?: string;
}

/** Options of {@linkcode addAddress}. */
export interface AddAddressOptions {
  /** Address scope; default "universe". */
  scope?: "universe" | "link" | "host";
  /** Don't add the prefix route the kernel normally adds for the subnet. */
  noPrefixRoute?: boolean;
}

const IFA_ADDRESS = 1;
const IFA_LOCAL = 2;
const IFA_LABEL = 3;
const IFA_FLAGS = 8;
const IFA_F_NOPREFIXROUTE = 0x200;
const IFADDRMSG_LEN = 8;

function refCheck(link: LinkRef): void {
  if (typeof link === "string") checkIfName(link);
}

function addressRequest(
  type: number,
  flags: number,
  index: number,
  cidr: string,
  scope = 0,
): MessageBuilder {
  const c = parseCidr(cidr, false, "address");
  const b = new MessageBuilder(type, flags)
    .u8(afOf(c.family)).u8(c.prefixLen).u8(0).u8(scope).u32(index);
  b.attr(IFA_LOCAL, c.bytes).attr(IFA_ADDRESS, c.bytes);
  return b;
}

/** Adds `cidr` (e.g. "10.0.0.5/32", "fd00::5/64") to a link; ExistsError if it is there. */
export function addAddress(
  s: NetlinkSocket,
  link: LinkRef,
  cidr: string,
  o: AddAddressOptions = {},
): void {
  refCheck(link);
  parseCidr(cidr, false, "address");
  const scope = scopeNumber(o.scope ?? "universe");
  const index = linkIndex(s, link);
  const b = addressRequest(RTM.NEWADDR, NLM_F_CREATE | NLM_F_EXCL, index, cidr, scope);
  if (o.noPrefixRoute) b.attrU32(IFA_FLAGS, IFA_F_NOPREFIXROUTE);
  s.request(b, `${cidr} dev ${link}`);
}

/** Removes `cidr` from a link; NotFoundError if it is not there. */
export function deleteAddress(s: NetlinkSocket, link: LinkRef, cidr: string): void {
  refCheck(link);
  parseCidr(cidr, false, "address");
  const index = linkIndex(s, link);
  s.request(addressRequest(RTM.DELADDR, 0, index, cidr), `${cidr} dev ${link}`);
}

/** Decodes one RTM_NEWADDR message. */
export function parseAddress(msg: NetlinkMessage): Address | undefined {
  const d = msg.data;
  const family = familyOfAf(d[0]);
  if (family === undefined) return undefined;
  const view = new DataView(d.buffer, d.byteOffset, d.byteLength);
  const a = parseAttrs(d, IFADDRMSG_LEN);
  const raw = (family === 4 ? a.get(IFA_LOCAL) : undefined) ?? a.get(IFA_ADDRESS) ??
    a.get(IFA_LOCAL);
  if (!raw) return undefined;
  const addr: Address = {
    index: view.getUint32(4, true),
    family,
    address: formatIp(raw),
    prefixLen: d[1],
    scope: scopeName(d[3]),
  };
  const label = a.get(IFA_LABEL);
  if (label) addr.label = getString(label);
  return addr;
}

/** Addresses in the socket's netns, optionally of one link and/or one family. */
export function listAddresses(
  s: NetlinkSocket,
  filter: { link?: LinkRef; family?: Family } = {},
): Address[] {
  const f = linkFamilyFilter(s, filter, refCheck);
  const b = new MessageBuilder(RTM.GETADDR, NLM_F_DUMP).u8(f.af).u8(0).u8(0).u8(0).u32(0);
  return s.dump(b, (m) => {
    if (m.type !== RTM.NEWADDR) return undefined;
    const addr = parseAddress(m);
    return addr && f.keeps(addr) ? addr : undefined;
  });
}
