/**
 * Neighbour (ARP/NDP) entries: add-or-replace permanent entries, delete, list.
 *
 * @module
 */

import {
  MessageBuilder,
  type NetlinkMessage,
  NLM_F_CREATE,
  NLM_F_DUMP,
  NLM_F_REPLACE,
  parseAttrs,
  RTM,
} from "./codec.ts";
import { InvalidInputError } from "./errors.ts";
import { afOf, type Family, familyOfAf, formatIp, formatMac, parseIp, parseMac } from "./ip.ts";
import { linkFamilyFilter, linkIndex, type LinkRef } from "./link.ts";
import type { NetlinkSocket } from "./socket.ts";
import { checkIfName } from "./validate.ts";

/** A neighbour entry. */
export interface Neighbour {
  /** ifindex of the link. */
  index: number;
  /** 4 or 6. */
  family: Family;
  /** The neighbour's IP. */
  ip: string;
  /** Its link-layer address, when known. */
  mac?: string;
  /** NUD state: "permanent", "reachable", "stale", "noarp", "failed"… */
  state: string;
}

const NDA_DST = 1;
const NDA_LLADDR = 2;
const NUD_PERMANENT = 0x80;
const NDMSG_LEN = 12;

const STATES: [number, string][] = [
  [0x01, "incomplete"],
  [0x02, "reachable"],
  [0x04, "stale"],
  [0x08, "delay"],
  [0x10, "probe"],
  [0x20, "failed"],
  [0x40, "noarp"],
  [0x80, "permanent"],
];

/** The NUD state name for a state bit mask ("none" for 0). */
export function neighbourStateName(state: number): string {
  const names = STATES.filter(([bit]) => state & bit).map(([, n]) => n);
  return names.length > 0 ? names.join(",") : "none";
}

function neighRequest(
  type: number,
  flags: number,
  af: number,
  index: number,
  state: number,
): MessageBuilder {
  return new MessageBuilder(type, flags)
    .u8(af).u8(0).u16(0).i32(index).u16(state).u8(0).u8(0);
}

function checkLink(link: LinkRef): void {
  if (typeof link === "string") checkIfName(link, "neighbour link");
  else if (typeof link !== "number") throw new InvalidInputError("neighbour link is required");
}

/** Adds a permanent entry `ip → mac` on `link`, replacing any entry for that IP. */
export function setNeighbour(
  s: NetlinkSocket,
  o: { link: LinkRef; ip: string; mac: string },
): void {
  checkLink(o.link);
  const ip = parseIp(o.ip, "neighbour IP");
  const mac = parseMac(o.mac);
  const index = linkIndex(s, o.link);
  const b = neighRequest(
    RTM.NEWNEIGH,
    NLM_F_CREATE | NLM_F_REPLACE,
    afOf(ip.family),
    index,
    NUD_PERMANENT,
  )
    .attr(NDA_DST, ip.bytes).attr(NDA_LLADDR, mac);
  s.request(b, `${o.ip} dev ${o.link}`);
}

/** Deletes the entry for `ip` on `link`; NotFoundError when there is none. */
export function deleteNeighbour(s: NetlinkSocket, o: { link: LinkRef; ip: string }): void {
  checkLink(o.link);
  const ip = parseIp(o.ip, "neighbour IP");
  const index = linkIndex(s, o.link);
  const b = neighRequest(RTM.DELNEIGH, 0, afOf(ip.family), index, 0).attr(NDA_DST, ip.bytes);
  s.request(b, `${o.ip} dev ${o.link}`);
}

/** Decodes one RTM_NEWNEIGH message. */
export function parseNeighbour(msg: NetlinkMessage): Neighbour | undefined {
  const d = msg.data;
  const family = familyOfAf(d[0]);
  if (family === undefined) return undefined;
  const view = new DataView(d.buffer, d.byteOffset, d.byteLength);
  const a = parseAttrs(d, NDMSG_LEN);
  const dst = a.get(NDA_DST);
  if (!dst) return undefined;
  const n: Neighbour = {
    index: view.getInt32(4, true),
    family,
    ip: formatIp(dst),
    state: neighbourStateName(view.getUint16(8, true)),
  };
  const ll = a.get(NDA_LLADDR);
  if (ll && ll.length > 0) n.mac = formatMac(ll);
  return n;
}

/** Neighbour entries in the socket's netns, optionally of one link and/or family. */
export function listNeighbours(
  s: NetlinkSocket,
  filter: { link?: LinkRef; family?: Family } = {},
): Neighbour[] {
  const f = linkFamilyFilter(s, filter, checkLink);
  const b = neighRequest(RTM.GETNEIGH, NLM_F_DUMP, f.af, 0, 0);
  return s.dump(b, (m) => {
    if (m.type !== RTM.NEWNEIGH) return undefined;
    const n = parseNeighbour(m);
    return n && f.keeps(n) ? n : undefined;
  });
}
