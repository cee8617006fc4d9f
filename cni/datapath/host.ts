/**
 * Host-level setup shared by every pod of an ENI: forwarding, the ENI link (up; its MTU is
 * never changed), and its route table T(E). Idempotent: it reads first and changes only what differs, so ADD can
 * call it every time.
 *
 * @module
 */
import {
  addAddress,
  deleteRoute,
  findLink,
  findLinkByMac,
  isExists,
  isNotFound,
  type Link,
  listAddresses,
  listRoutes,
  MAIN_TABLE,
  type NetlinkSocket,
  readSysctl,
  replaceRoute,
  setLinkUp,
  writeSysctl,
} from "../../netlink/mod.ts";
import { DatapathError, DatapathInputError } from "./errors.ts";
import { canonicalDst } from "../../base/ipv4.ts";
import { eniTable } from "./naming.ts";
import type { PlannedRoute } from "./plan.ts";
import { routeMatches } from "./compare.ts";
import type { DatapathConfig, DatapathEni, EniInfo, PodAddress } from "./types.ts";

/** Sysctls every datapath needs on the host: pods' packets are forwarded. */
export const HOST_SYSCTLS: ReadonlyArray<readonly [string, string]> = [
  ["net.ipv4.ip_forward", "1"],
];

/** Sets the host sysctls that differ from what the datapath needs. */
export function ensureHostSysctls(): void {
  for (const [key, value] of HOST_SYSCTLS) {
    if (readSysctl(key) !== value) writeSysctl(key, value);
  }
}

/**
 * How long to wait for a freshly attached ENI's link. EC2 reports an attach (and IMDS lists
 * the ENI) before the node's kernel has registered the hot-plugged device, so the first pod
 * on a new ENI may arrive first; every later pod finds the link at once.
 */
export const ENI_LINK_WAIT_MS = 5000;

const sleepCell = new Int32Array(new SharedArrayBuffer(4));

/** Blocks the (single) JS thread for `ms`: the datapath API is synchronous by design. */
function sleepSync(ms: number): void {
  Atomics.wait(sleepCell, 0, 0, ms);
}

/** The link of an ENI on this host, found by its MAC; throws when it does not appear. */
export function eniLink(s: NetlinkSocket, eni: EniInfo, waitMs = ENI_LINK_WAIT_MS): Link {
  const deadline = performance.now() + waitMs;
  let link = findLinkByMac(s, eni.mac);
  while (!link && performance.now() < deadline) {
    sleepSync(50);
    link = findLinkByMac(s, eni.mac);
  }
  if (!link) {
    throw new DatapathError(
      `host: find the link of ${eni.id}`,
      new Error(
        `no link has MAC ${eni.mac} after ${waitMs} ms; is the ENI attached to this instance?`,
      ),
    );
  }
  return link;
}

/**
 * Sysctls of an ENI's link. Pod addresses sit behind the host (veth, and ipvlan-l3s whose
 * ARP the host handles): should anything on the ENI's segment ask for one by ARP, the host
 * answers for it at once (proxy ARP without its random delay). The VPC itself never asks,
 * but a fabric or network that does then still reaches the pod. ipvlan-l2 slaves answer
 * for themselves.
 */
export function eniLinkSysctls(
  cfg: Pick<DatapathConfig, "kind">,
  linkName: string,
): [string, string][] {
  if (cfg.kind === "ipvlan-l2") return [];
  // Slash form: a link name may contain dots.
  return [
    [`net/ipv4/conf/${linkName}/proxy_arp`, "1"],
    [`net/ipv4/neigh/${linkName}/proxy_delay`, "0"],
  ];
}

/** The address a secondary ENI's link carries: its primary IP with the subnet's prefix. */
export function eniAddress(eni: DatapathEni): string | undefined {
  if (!eni.primaryIp || eni.primary || eni.deviceIndex === 0) return undefined;
  return `${eni.primaryIp}/${eni.subnetCidr.split("/")[1]}`;
}

/** The routes T(E) holds for an ENI other than the primary: gateway, default, subnet. */
export function eniTableRoutes(eni: EniInfo, linkName: string): PlannedRoute[] {
  const table = eniTable(eni);
  return [
    { dst: `${eni.gateway}/32`, dev: linkName, scope: "link", table },
    { dst: "default", gateway: eni.gateway, dev: linkName, scope: "universe", table },
    { dst: canonicalDst(eni.subnetCidr), dev: linkName, scope: "link", table },
  ];
}

/**
 * Brings the ENI link up and fills T(E). Its MTU is left as it is: the link is shared by
 * every pod of the ENI (and, for the primary, the node itself), so no pod's configuration
 * changes it; pods get at most the link's MTU instead.
 */
export function ensureEni(
  s: NetlinkSocket,
  cfg: DatapathConfig,
  eni: DatapathEni,
  link: Link = eniLink(s, eni),
): Link {
  const primary = eni.primary || eni.deviceIndex === 0;
  const step = (what: string, fn: () => void) => {
    try {
      fn();
    } catch (e) {
      throw new DatapathError(`host: ${what} ${link.name} (${eni.id})`, e);
    }
  };
  if (!link.up) step("set up", () => setLinkUp(s, link.index));
  for (const [key, value] of eniLinkSysctls(cfg, link.name)) {
    if (readSysctl(key) !== value) {
      step(`sysctl ${key}=${value} for`, () => writeSysctl(key, value));
    }
  }
  if (primary) return link;

  const own = eniAddress(eni);
  if (
    own &&
    !listAddresses(s, { link: link.index, family: 4 }).some((a) =>
      `${a.address}/${a.prefixLen}` === own
    )
  ) {
    step(`add address ${own} (no prefix route) to`, () => {
      try {
        addAddress(s, link.index, own, { noPrefixRoute: true });
      } catch (e) {
        if (!isExists(e)) throw e;
      }
    });
  }
  const want = eniTableRoutes(eni, link.name);
  const have = listRoutes(s, { table: want[0].table, family: 4 });
  for (const r of want) {
    // Judged as CHECK judges it, so a route ADD leaves alone is one CHECK accepts.
    if (!routeMatches(r, have, link.index)) {
      step(
        `add route ${r.dst} table ${r.table} via`,
        () => replaceRoute(s, { ...r, dev: link.index }),
      );
    }
  }
  // The subnet route belongs in T(E) only; one in main (from an address on the ENI) would
  // send replies for this subnet out of the wrong ENI.
  const subnet = canonicalDst(eni.subnetCidr);
  for (const r of listRoutes(s, { table: MAIN_TABLE, family: 4, dev: link.index })) {
    if (r.dst === subnet && !r.gateway) {
      try {
        deleteRoute(s, { dst: r.dst, dev: link.index, table: MAIN_TABLE });
      } catch (e) {
        if (!isNotFound(e)) throw new DatapathError(`host: remove ${subnet} from main`, e);
      }
    }
  }
  return { ...link, up: true };
}

/**
 * The ipvlan parent: the ENI's link, else `address.master`, else the link of the main
 * table's default route. The pod's MTU is bounded by the parent's (cni/datapath/mod.ts).
 */
export function resolveParent(s: NetlinkSocket, a: PodAddress): Link {
  let link: Link | undefined;
  if (a.eni) link = eniLink(s, a.eni);
  else if (a.master) {
    link = findLink(s, a.master);
    if (!link) throw new DatapathInputError(`master ${a.master} does not exist on this host`);
  } else {
    const def = listRoutes(s, { table: MAIN_TABLE, family: 4 }).find((r) =>
      r.dst === "default" && r.dev !== undefined
    );
    link = def?.dev !== undefined ? findLink(s, def.dev) : undefined;
    if (!link) {
      throw new DatapathInputError(
        "no ENI and no master given, and the host has no default route to take the ipvlan parent from",
      );
    }
  }
  return link;
}

/**
 * The node addresses routed over the host veth in ipvlan pods: `cfg.nodeIps`, or when that
 * is empty every global IPv4 address of the host.
 */
export function nodeIpsOf(s: NetlinkSocket, cfg: DatapathConfig): string[] {
  if (cfg.nodeIps.length > 0) return cfg.nodeIps;
  return listAddresses(s, { family: 4 }).filter((a) => a.scope === "universe").map((a) =>
    a.address
  );
}
