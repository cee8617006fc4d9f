/**
 * Routes: add, replace, delete, list — with table, scope, gateway, dev, src, onlink, MTU and
 * metric.
 *
 * @module
 */

import {
  getU32,
  MessageBuilder,
  type NetlinkMessage,
  NLM_F_CREATE,
  NLM_F_DUMP,
  NLM_F_EXCL,
  NLM_F_REPLACE,
  parseAttrs,
  RTM,
} from "./codec.ts";
import { InvalidInputError } from "./errors.ts";
import { afOf, type Family, familyOfAf, formatIp, parseCidr, parseIp } from "./ip.ts";
import { linkIndex, type LinkRef } from "./link.ts";
import { checkFamily, type ScopeName, scopeName, scopeNumber } from "./scope.ts";
import type { NetlinkSocket } from "./socket.ts";
import { checkIfName, checkMtu, checkU32 } from "./validate.ts";

/** The main routing table. */
export const MAIN_TABLE = 254;

/** A route as the kernel reports it. */
export interface Route {
  /** "default" or "addr/len". */
  dst: string;
  /** 4 or 6. */
  family: Family;
  /** Next hop. */
  gateway?: string;
  /** Output ifindex. */
  dev?: number;
  /** Preferred source address. */
  src?: string;
  /** Table id (254 is main). */
  table: number;
  /** Scope. */
  scope: ScopeName;
  /** The gateway is taken as on-link (RTNH_F_ONLINK). */
  onlink?: boolean;
  /** Path MTU (RTAX_MTU). */
  mtu?: number;
  /** Metric / priority. */
  metric?: number;
  /** Routing protocol number (3 boot, 4 static, 2 kernel…). */
  protocol?: number;
  /** Route type: "unicast", "local", "broadcast", "blackhole", "unreachable"… */
  type?: string;
}

/** A route to add/replace/delete; `dev` may be a name. Bare addresses mean /32 or /128. */
export type RouteSpec = Omit<Partial<Route>, "dev"> & { dst: string; dev?: LinkRef };

const RTA_DST = 1;
const RTA_OIF = 4;
const RTA_GATEWAY = 5;
const RTA_PRIORITY = 6;
const RTA_PREFSRC = 7;
const RTA_METRICS = 8;
const RTA_TABLE = 15;
const RTAX_MTU = 2;
const RTNH_F_ONLINK = 4;
const RTM_F_CLONED = 0x200;
const RTPROT_BOOT = 3;
const RTMSG_LEN = 12;

const TYPES = [
  "unspec",
  "unicast",
  "local",
  "broadcast",
  "anycast",
  "multicast",
  "blackhole",
  "unreachable",
  "prohibit",
  "throw",
  "nat",
];

/** A RouteSpec checked and resolved to wire values (no syscall yet, except name lookup). */
interface ResolvedRoute {
  family: Family;
  dst: Uint8Array;
  dstLen: number;
  gateway?: Uint8Array;
  src?: Uint8Array;
  table: number;
  type?: number;
  scope?: number;
  protocol?: number;
  metric?: number;
  mtu?: number;
  onlink: boolean;
}

function describe(r: RouteSpec): string {
  let s = r.dst;
  if (r.gateway) s += ` via ${r.gateway}`;
  if (r.dev !== undefined) s += ` dev ${r.dev}`;
  if (r.table !== undefined && r.table !== MAIN_TABLE) s += ` table ${r.table}`;
  return s;
}

/** Checks a RouteSpec before any syscall; throws InvalidInputError with what is wrong. */
function resolve(r: RouteSpec): ResolvedRoute {
  if (typeof r?.dst !== "string") throw new InvalidInputError("route dst is required");
  const gw = r.gateway !== undefined ? parseIp(r.gateway, "gateway") : undefined;
  const src = r.src !== undefined ? parseIp(r.src, "route src") : undefined;
  let family: Family;
  let dst: Uint8Array;
  let dstLen: number;
  if (r.dst === "default") {
    family = r.family !== undefined ? checkFamily(r.family) : gw?.family ?? src?.family ?? 4;
    dst = new Uint8Array(family === 4 ? 4 : 16);
    dstLen = 0;
  } else {
    const c = parseCidr(r.dst, true, "route dst");
    family = c.family;
    dst = c.bytes;
    dstLen = c.prefixLen;
    if (r.family !== undefined && checkFamily(r.family) !== family) {
      throw new InvalidInputError(`route dst ${r.dst} is IPv${family}, not IPv${r.family}`);
    }
  }
  for (const [what, p] of [["gateway", gw], ["src", src]] as const) {
    if (p && p.family !== family) {
      throw new InvalidInputError(
        `wrong address family: route ${what} ${
          what === "gateway" ? r.gateway : r.src
        } is IPv${p.family} but dst ${r.dst} is IPv${family}`,
      );
    }
  }
  if (typeof r.dev === "string") checkIfName(r.dev, "route dev");
  let type: number | undefined;
  if (r.type !== undefined) {
    type = TYPES.indexOf(r.type);
    if (type <= 0) throw new InvalidInputError(`unknown route type ${JSON.stringify(r.type)}`);
  }
  return {
    family,
    dst,
    dstLen,
    gateway: gw?.bytes,
    src: src?.bytes,
    table: r.table !== undefined ? checkU32(r.table, "route table") : MAIN_TABLE,
    type,
    scope: r.scope !== undefined ? scopeNumber(r.scope) : undefined,
    protocol: r.protocol !== undefined ? checkU32(r.protocol, "route protocol") : undefined,
    metric: r.metric !== undefined ? checkU32(r.metric, "route metric") : undefined,
    mtu: r.mtu !== undefined ? checkMtu(r.mtu) : undefined,
    onlink: r.onlink === true,
  };
}

function routeRequest(
  s: NetlinkSocket,
  msgType: number,
  flags: number,
  r: ResolvedRoute,
  dev: LinkRef | undefined,
): MessageBuilder {
  const del = msgType === RTM.DELROUTE;
  const type = r.type ?? (del ? 0 : 1);
  let scope = r.scope;
  if (scope === undefined) {
    // iproute2's defaults: delete matches any scope; a local route is host-scoped; a
    // unicast route without a gateway is link-scoped.
    if (del) scope = 255;
    else if (type === 2) scope = 254;
    else if (type === 1 && !r.gateway) scope = 253;
    else scope = 0;
  }
  const protocol = r.protocol ?? (del ? 0 : RTPROT_BOOT);
  const index = dev !== undefined ? linkIndex(s, dev) : undefined;
  const b = new MessageBuilder(msgType, flags)
    .u8(afOf(r.family)).u8(r.dstLen).u8(0).u8(0)
    .u8(r.table < 256 ? r.table : 0).u8(protocol).u8(scope).u8(type)
    .u32(r.onlink ? RTNH_F_ONLINK : 0);
  b.attrU32(RTA_TABLE, r.table);
  if (r.dstLen > 0) b.attr(RTA_DST, r.dst);
  if (r.gateway) b.attr(RTA_GATEWAY, r.gateway);
  if (index !== undefined) b.attrU32(RTA_OIF, index);
  if (r.src) b.attr(RTA_PREFSRC, r.src);
  if (r.metric !== undefined) b.attrU32(RTA_PRIORITY, r.metric);
  if (r.mtu !== undefined) {
    const m = b.beginNest(RTA_METRICS);
    b.attrU32(RTAX_MTU, r.mtu);
    b.endNest(m);
  }
  return b;
}

/** Adds a route; ExistsError when the same route is there. */
export function addRoute(s: NetlinkSocket, r: RouteSpec): void {
  const res = resolve(r);
  s.request(routeRequest(s, RTM.NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, res, r.dev), describe(r));
}

/** Adds a route or replaces the one with the same dst/table/metric. */
export function replaceRoute(s: NetlinkSocket, r: RouteSpec): void {
  const res = resolve(r);
  s.request(
    routeRequest(s, RTM.NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, res, r.dev),
    describe(r),
  );
}

/** Deletes the route matching the given fields; NotFoundError when none matches. */
export function deleteRoute(s: NetlinkSocket, r: RouteSpec): void {
  const res = resolve(r);
  s.request(routeRequest(s, RTM.DELROUTE, 0, res, r.dev), describe(r));
}

/** Decodes one RTM_NEWROUTE message (cloned cache entries are skipped). */
export function parseRoute(msg: NetlinkMessage): Route | undefined {
  const d = msg.data;
  const family = familyOfAf(d[0]);
  if (family === undefined) return undefined;
  const view = new DataView(d.buffer, d.byteOffset, d.byteLength);
  const flags = view.getUint32(8, true);
  if (flags & RTM_F_CLONED) return undefined;
  const a = parseAttrs(d, RTMSG_LEN);
  const dstLen = d[1];
  const dst = a.get(RTA_DST);
  const route: Route = {
    dst: dstLen === 0 && !dst ? "default" : `${formatIp(dst!)}/${dstLen}`,
    family,
    table: a.has(RTA_TABLE) ? getU32(a.get(RTA_TABLE)!) : d[4],
    scope: scopeName(d[6]),
    protocol: d[5],
    type: TYPES[d[7]] ?? String(d[7]),
  };
  if (a.has(RTA_GATEWAY)) route.gateway = formatIp(a.get(RTA_GATEWAY)!);
  if (a.has(RTA_OIF)) route.dev = getU32(a.get(RTA_OIF)!);
  if (a.has(RTA_PREFSRC)) route.src = formatIp(a.get(RTA_PREFSRC)!);
  if (a.has(RTA_PRIORITY)) route.metric = getU32(a.get(RTA_PRIORITY)!);
  if (flags & RTNH_F_ONLINK) route.onlink = true;
  const metrics = a.get(RTA_METRICS);
  if (metrics) {
    const mtu = parseAttrs(metrics).get(RTAX_MTU);
    if (mtu) route.mtu = getU32(mtu);
  }
  return route;
}

/** Routes in the socket's netns; every table unless `table` is given. */
export function listRoutes(
  s: NetlinkSocket,
  filter: { table?: number; family?: Family; dev?: LinkRef } = {},
): Route[] {
  if (filter.family !== undefined) checkFamily(filter.family);
  if (filter.table !== undefined) checkU32(filter.table, "route table");
  if (typeof filter.dev === "string") checkIfName(filter.dev, "route dev");
  const dev = filter.dev !== undefined ? linkIndex(s, filter.dev) : undefined;
  const af = filter.family !== undefined ? afOf(filter.family) : 0;
  const b = new MessageBuilder(RTM.GETROUTE, NLM_F_DUMP)
    .u8(af).u8(0).u8(0).u8(0).u8(0).u8(0).u8(0).u8(0).u32(0);
  return s.dump(b, (m) => {
    if (m.type !== RTM.NEWROUTE) return undefined;
    const r = parseRoute(m);
    if (!r) return undefined;
    if (filter.table !== undefined && r.table !== filter.table) return undefined;
    if (dev !== undefined && r.dev !== dev) return undefined;
    return r;
  });
}
