/**
 * Links (network interfaces): list, get, create veth and ipvlan (directly inside another
 * netns), set up/down, MTU, name, MAC, move between netns, delete.
 *
 * @module
 */

import {
  getString,
  getU16,
  getU32,
  getU8,
  MessageBuilder,
  type NetlinkMessage,
  NLM_F_CREATE,
  NLM_F_DUMP,
  NLM_F_EXCL,
  parseAttrs,
  RTM,
} from "./codec.ts";
import { InvalidInputError, isNotFound } from "./errors.ts";
import { afOf, type Family, formatMac, parseMac } from "./ip.ts";
import { NetnsHandle } from "./netns.ts";
import { checkFamily } from "./scope.ts";
import type { NetlinkSocket } from "./socket.ts";
import { checkIfName, checkInt, checkMtu } from "./validate.ts";

/** A link as the kernel reports it. */
export interface Link {
  /** ifindex, unique within its netns. */
  index: number;
  /** Interface name. */
  name: string;
  /** rtnl link kind ("veth", "ipvlan", "bridge"…); absent for physical devices and lo. */
  kind?: string;
  /** MTU in bytes. */
  mtu: number;
  /** Hardware address, lower-case "aa:bb:…" ("" when the link has none). */
  mac: string;
  /** Administratively up (IFF_UP). */
  up: boolean;
  /** RFC 2863 operational state as iproute2 prints it: "UP", "DOWN", "UNKNOWN", "LOWERLAYERDOWN"… */
  operState: string;
  /** IFLA_LINK: the parent (ipvlan) or peer (veth) ifindex; in `linkNetnsId`'s netns if set. */
  parentIndex?: number;
  /** IFLA_MASTER: the bridge/bond this link is enslaved to. */
  masterIndex?: number;
  /** IFLA_LINK_NETNSID: the netns id (in this netns) where `parentIndex` lives. */
  linkNetnsId?: number;
  /** ipvlan mode, for ipvlan links. */
  ipvlanMode?: IpvlanMode;
  /** ipvlan flag, for ipvlan links. */
  ipvlanFlag?: IpvlanFlag;
}

/** A link by ifindex or by name. */
export type LinkRef = number | string;
/** ipvlan modes. */
export type IpvlanMode = "l2" | "l3" | "l3s";
/** ipvlan flags. */
export type IpvlanFlag = "bridge" | "private" | "vepa";

/** Options of {@linkcode createVeth}. */
export interface VethOptions {
  /** Name of the end created in the socket's netns. */
  name: string;
  /** Name of the other end. */
  peerName: string;
  /** Create the peer directly inside this netns (path); default: the socket's netns. */
  peerNetns?: string;
  /** MTU of both ends. */
  mtu?: number;
  /** MAC of `name`. */
  mac?: string;
  /** MAC of `peerName`. */
  peerMac?: string;
}

/** Options of {@linkcode createIpvlan}. */
export interface IpvlanOptions {
  /** Name of the new slave. */
  name: string;
  /** The master, in the socket's netns. */
  parent: LinkRef;
  /** ipvlan mode. */
  mode: IpvlanMode;
  /** ipvlan flag; the kernel's default is "bridge". */
  flag?: IpvlanFlag;
  /** Create the slave directly inside this netns (path). */
  netns?: string;
  /** MTU (at most the parent's). */
  mtu?: number;
}

const IFF_UP = 0x1;
const IFLA_ADDRESS = 1;
const IFLA_IFNAME = 3;
const IFLA_MTU = 4;
const IFLA_LINK = 5;
const IFLA_MASTER = 10;
const IFLA_OPERSTATE = 16;
const IFLA_LINKINFO = 18;
const IFLA_NET_NS_FD = 28;
const IFLA_EXT_MASK = 29;
const IFLA_LINK_NETNSID = 37;
const IFLA_INFO_KIND = 1;
const IFLA_INFO_DATA = 2;
const VETH_INFO_PEER = 1;
const IFLA_IPVLAN_MODE = 1;
const IFLA_IPVLAN_FLAGS = 2;
const RTEXT_FILTER_SKIP_STATS = 1 << 3;
const IFINFOMSG_LEN = 16;

const OPER_STATES = [
  "UNKNOWN",
  "NOTPRESENT",
  "DOWN",
  "LOWERLAYERDOWN",
  "TESTING",
  "DORMANT",
  "UP",
];
const IPVLAN_MODES: IpvlanMode[] = ["l2", "l3", "l3s"];
const IPVLAN_FLAGS: IpvlanFlag[] = ["bridge", "private", "vepa"];

/** A dump's filter by link and family, checked and resolved before the dump is asked for. */
export interface LinkFamilyFilter {
  /** The address family to ask the kernel for (0, AF_UNSPEC: both). */
  af: number;
  /** True when an entry on ifindex `index` of `family` passes the filter. */
  keeps(entry: { index: number; family: Family }): boolean;
}

/**
 * Checks `filter` (the family, then the link with `checkRef`) and resolves its link to an
 * ifindex once, so a dump keeps only the entries of that link and family.
 */
export function linkFamilyFilter(
  s: NetlinkSocket,
  filter: { link?: LinkRef; family?: Family },
  checkRef: (link: LinkRef) => void,
): LinkFamilyFilter {
  const { link, family } = filter;
  if (family !== undefined) checkFamily(family);
  if (link !== undefined) checkRef(link);
  const index = link !== undefined ? linkIndex(s, link) : undefined;
  return {
    af: family !== undefined ? afOf(family) : 0,
    keeps: (e) =>
      (index === undefined || e.index === index) && (family === undefined || e.family === family),
  };
}

/** Writes a struct ifinfomsg. */
function ifinfomsg(b: MessageBuilder, index = 0, flags = 0, change = 0): MessageBuilder {
  return b.u8(0).u8(0).u16(0).i32(index).u32(flags).u32(change);
}

/** Starts a link request addressed to `ref` (by index, or by IFLA_IFNAME with index 0). */
function linkRequest(type: number, ref: LinkRef, flags = 0, change = 0, nlFlags = 0) {
  const b = new MessageBuilder(type, nlFlags);
  if (typeof ref === "number") {
    ifinfomsg(b, checkInt(ref, 1, 0x7fffffff, "ifindex"), flags, change);
  } else {
    ifinfomsg(b, 0, flags, change).attrString(IFLA_IFNAME, checkIfName(ref));
  }
  return b;
}

function subjectOf(ref: LinkRef): string {
  return typeof ref === "number" ? `ifindex ${ref}` : ref;
}

/** Decodes one RTM_NEWLINK message. */
export function parseLink(msg: NetlinkMessage): Link {
  const d = msg.data;
  const view = new DataView(d.buffer, d.byteOffset, d.byteLength);
  const index = view.getInt32(4, true);
  const flags = view.getUint32(8, true);
  const a = parseAttrs(d, IFINFOMSG_LEN);
  const link: Link = {
    index,
    name: getString(a.get(IFLA_IFNAME) ?? new Uint8Array()),
    mtu: a.has(IFLA_MTU) ? getU32(a.get(IFLA_MTU)!) : 0,
    mac: a.has(IFLA_ADDRESS) ? formatMac(a.get(IFLA_ADDRESS)!) : "",
    up: (flags & IFF_UP) !== 0,
    operState: OPER_STATES[a.has(IFLA_OPERSTATE) ? getU8(a.get(IFLA_OPERSTATE)!) : 0] ??
      "UNKNOWN",
  };
  // The kernel sends IFLA_LINK only when it means something (differs, or lives elsewhere).
  if (a.has(IFLA_LINK)) link.parentIndex = getU32(a.get(IFLA_LINK)!);
  if (a.has(IFLA_MASTER)) link.masterIndex = getU32(a.get(IFLA_MASTER)!);
  if (a.has(IFLA_LINK_NETNSID)) link.linkNetnsId = getU32(a.get(IFLA_LINK_NETNSID)!) | 0;
  const info = a.get(IFLA_LINKINFO);
  if (info) {
    const ia = parseAttrs(info);
    const kind = ia.get(IFLA_INFO_KIND);
    if (kind) link.kind = getString(kind);
    const data = ia.get(IFLA_INFO_DATA);
    if (link.kind === "ipvlan" && data) {
      const da = parseAttrs(data);
      const mode = da.get(IFLA_IPVLAN_MODE);
      const flag = da.get(IFLA_IPVLAN_FLAGS);
      if (mode) link.ipvlanMode = IPVLAN_MODES[getU16(mode)];
      if (flag) link.ipvlanFlag = IPVLAN_FLAGS[getU16(flag) & 0x3];
    }
  }
  return link;
}

/** Every link in the socket's netns. */
export function listLinks(s: NetlinkSocket): Link[] {
  const b = ifinfomsg(new MessageBuilder(RTM.GETLINK, NLM_F_DUMP))
    .attrU32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
  return s.dump(b, (m) => (m.type === RTM.NEWLINK ? parseLink(m) : undefined));
}

/** The link `ref`; throws NotFoundError when it is not there. */
export function getLink(s: NetlinkSocket, ref: LinkRef): Link {
  const b = linkRequest(RTM.GETLINK, ref).attrU32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
  return s.get(b, parseLink, subjectOf(ref));
}

/** The link `ref`, or undefined when it is not there. */
export function findLink(s: NetlinkSocket, ref: LinkRef): Link | undefined {
  try {
    return getLink(s, ref);
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

/** The link whose hardware address is `mac` (case-insensitive), if any. */
export function findLinkByMac(s: NetlinkSocket, mac: string): Link | undefined {
  const want = formatMac(parseMac(mac));
  return listLinks(s).find((l) => l.mac === want);
}

/** The ifindex of `ref` (a GETLINK round trip for a name). */
export function linkIndex(s: NetlinkSocket, ref: LinkRef): number {
  if (typeof ref === "number") return checkInt(ref, 1, 0x7fffffff, "ifindex");
  return getLink(s, ref).index;
}

/** Builds the RTM_NEWLINK request that creates a veth pair (see {@linkcode createVeth}). */
export function vethRequest(o: VethOptions, peerNetnsFd?: number): MessageBuilder {
  const b = ifinfomsg(new MessageBuilder(RTM.NEWLINK, NLM_F_CREATE | NLM_F_EXCL));
  b.attrString(IFLA_IFNAME, o.name);
  if (o.mtu !== undefined) b.attrU32(IFLA_MTU, o.mtu);
  if (o.mac !== undefined) b.attr(IFLA_ADDRESS, parseMac(o.mac));
  const info = b.beginNest(IFLA_LINKINFO);
  b.attrString(IFLA_INFO_KIND, "veth");
  const data = b.beginNest(IFLA_INFO_DATA);
  // The peer is a struct ifinfomsg followed by link attributes.
  const peer = b.beginPlainNest(VETH_INFO_PEER);
  ifinfomsg(b);
  b.attrString(IFLA_IFNAME, o.peerName);
  if (o.mtu !== undefined) b.attrU32(IFLA_MTU, o.mtu);
  if (o.peerMac !== undefined) b.attr(IFLA_ADDRESS, parseMac(o.peerMac));
  if (peerNetnsFd !== undefined) b.attrU32(IFLA_NET_NS_FD, peerNetnsFd);
  b.endNest(peer).endNest(data).endNest(info);
  return b;
}

/** Refuses bad veth options before any syscall. */
export function checkVethOptions(o: VethOptions): void {
  checkIfName(o.name, "veth name");
  checkIfName(o.peerName, "veth peer name");
  if (o.mtu !== undefined) checkMtu(o.mtu);
  if (o.mac !== undefined) parseMac(o.mac);
  if (o.peerMac !== undefined) parseMac(o.peerMac);
  if (o.peerNetns === undefined && o.name === o.peerName) {
    throw new InvalidInputError(`veth name and peer name are both ${JSON.stringify(o.name)}`);
  }
}

/** Creates a veth pair; the peer is created directly inside `peerNetns` when given. */
export function createVeth(s: NetlinkSocket, o: VethOptions): void {
  checkVethOptions(o);
  const ns = o.peerNetns !== undefined ? NetnsHandle.open(o.peerNetns) : undefined;
  try {
    s.request(vethRequest(o, ns?.fd), o.name);
  } finally {
    ns?.close();
  }
}

/** Creates an ipvlan slave of `parent`, directly inside `netns` when given. */
export function createIpvlan(s: NetlinkSocket, o: IpvlanOptions): void {
  checkIfName(o.name, "ipvlan name");
  const mode = IPVLAN_MODES.indexOf(o.mode);
  if (mode < 0) {
    throw new InvalidInputError(`ipvlan mode must be l2, l3 or l3s, got ${String(o.mode)}`);
  }
  const flag = o.flag === undefined ? -1 : IPVLAN_FLAGS.indexOf(o.flag);
  if (o.flag !== undefined && flag < 0) {
    throw new InvalidInputError(`ipvlan flag must be bridge, private or vepa, got ${o.flag}`);
  }
  if (o.mtu !== undefined) checkMtu(o.mtu);
  if (typeof o.parent === "string") checkIfName(o.parent, "ipvlan parent");
  const ns = o.netns !== undefined ? NetnsHandle.open(o.netns) : undefined;
  try {
    const parent = linkIndex(s, o.parent);
    const b = ifinfomsg(new MessageBuilder(RTM.NEWLINK, NLM_F_CREATE | NLM_F_EXCL));
    b.attrString(IFLA_IFNAME, o.name).attrU32(IFLA_LINK, parent);
    if (o.mtu !== undefined) b.attrU32(IFLA_MTU, o.mtu);
    if (ns) b.attrU32(IFLA_NET_NS_FD, ns.fd);
    const info = b.beginNest(IFLA_LINKINFO);
    b.attrString(IFLA_INFO_KIND, "ipvlan");
    const data = b.beginNest(IFLA_INFO_DATA);
    b.attrU16(IFLA_IPVLAN_MODE, mode);
    if (flag >= 0) b.attrU16(IFLA_IPVLAN_FLAGS, flag);
    b.endNest(data).endNest(info);
    s.request(b, o.name);
  } finally {
    ns?.close();
  }
}

/** Sets IFF_UP. */
export function setLinkUp(s: NetlinkSocket, ref: LinkRef): void {
  s.request(linkRequest(RTM.SETLINK, ref, IFF_UP, IFF_UP), subjectOf(ref));
}

/** Clears IFF_UP. */
export function setLinkDown(s: NetlinkSocket, ref: LinkRef): void {
  s.request(linkRequest(RTM.SETLINK, ref, 0, IFF_UP), subjectOf(ref));
}

/** Sets the MTU. */
export function setLinkMtu(s: NetlinkSocket, ref: LinkRef, mtu: number): void {
  checkMtu(mtu);
  s.request(linkRequest(RTM.SETLINK, ref).attrU32(IFLA_MTU, mtu), subjectOf(ref));
}

/** Renames a link (kernels before 6.2 refuse while it is up: BusyError). */
export function renameLink(s: NetlinkSocket, ref: LinkRef, newName: string): void {
  checkIfName(newName, "new interface name");
  if (typeof ref === "string") checkIfName(ref);
  const index = linkIndex(s, ref);
  const b = ifinfomsg(new MessageBuilder(RTM.SETLINK, 0), index).attrString(IFLA_IFNAME, newName);
  s.request(b, subjectOf(ref));
}

/** Sets the hardware address. */
export function setLinkMac(s: NetlinkSocket, ref: LinkRef, mac: string): void {
  const bytes = parseMac(mac);
  s.request(linkRequest(RTM.SETLINK, ref).attr(IFLA_ADDRESS, bytes), subjectOf(ref));
}

/** Moves a link into the netns at `netnsPath` (it goes down on the way). */
export function moveLinkToNetns(s: NetlinkSocket, ref: LinkRef, netnsPath: string): void {
  const b = linkRequest(RTM.SETLINK, ref);
  const ns = NetnsHandle.open(netnsPath);
  try {
    s.request(b.attrU32(IFLA_NET_NS_FD, ns.fd), subjectOf(ref));
  } finally {
    ns.close();
  }
}

/** Deletes a link (for a veth, both ends go). Throws NotFoundError when it is not there. */
export function deleteLink(s: NetlinkSocket, ref: LinkRef): void {
  s.request(linkRequest(RTM.DELLINK, ref), subjectOf(ref));
}
