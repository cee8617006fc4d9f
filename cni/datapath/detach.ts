/**
 * DEL: removes every object an attachment owns, whatever is already gone. Links take their
 * addresses, routes and neighbours with them; the policy rules are removed by pod IP, unless
 * another attachment on this host still routes that IP.
 *
 * @module
 */
import {
  deleteLink,
  deleteRule,
  findLink,
  isNotFound,
  listRoutes,
  listRules,
  MAIN_TABLE,
  type NetlinkSocket,
  netnsExists,
} from "../../netlink/mod.ts";
import { DatapathError } from "./errors.ts";
import { untouchableReason } from "./guard.ts";
import { RULE_PRIORITY_FROM_POD, RULE_PRIORITY_TO_POD } from "./types.ts";

function ignoreMissing(what: string, fn: () => void): void {
  try {
    fn();
  } catch (e) {
    if (!isNotFound(e)) throw new DatapathError(what, e);
  }
}

/**
 * The pod IP the host veth routes to (its `ip/32` in main), if the veth is still there and
 * is one the datapath made.
 */
export function podIpOfHostVeth(
  host: NetlinkSocket,
  hostVeth: string,
  eniMacs: Set<string> = new Set(),
): string | undefined {
  const link = findLink(host, hostVeth);
  if (!link || link.kind !== "veth" || untouchableReason(link, eniMacs)) return undefined;
  const r = listRoutes(host, { table: MAIN_TABLE, family: 4, dev: link.index })
    .find((r) => r.dst.endsWith("/32") && !r.gateway);
  return r?.dst.slice(0, -3);
}

/**
 * Deletes `name` unless it is missing or not the datapath's to delete (an ENI's MAC, a kind
 * the datapath never makes); returns why it was left alone, if it was.
 */
function deleteOwnLink(
  s: NetlinkSocket,
  side: string,
  name: string,
  eniMacs: Set<string>,
): string[] {
  const link = findLink(s, name);
  if (!link) return [];
  const why = untouchableReason(link, eniMacs);
  if (why) return [`${side}: left ${name} alone: ${why}`];
  // By index: the link found is the one checked.
  ignoreMissing(`${side}: delete link ${name}`, () => deleteLink(s, link.index));
  return [];
}

/**
 * Deletes the pod-side links named `names` in the pod netns, if it still exists; returns
 * the links left alone because they are not the datapath's (see {@linkcode deleteOwnLink}).
 */
export function deletePodLinks(
  netns: string | undefined,
  names: string[],
  open: (p: string) => NetlinkSocket,
  eniMacs: Set<string> = new Set(),
): string[] {
  if (!netns || !netnsExists(netns)) return [];
  let pod: NetlinkSocket;
  try {
    pod = open(netns);
  } catch (e) {
    if (isNotFound(e)) return []; // the netns went away under us
    throw new DatapathError(`pod: open netns ${netns}`, e);
  }
  try {
    return names.flatMap((name) => deleteOwnLink(pod, "pod", name, eniMacs));
  } finally {
    pod.close();
  }
}

/** Deletes the host veth unless it is not the datapath's; returns why it was left alone. */
export function deleteHostVeth(
  host: NetlinkSocket,
  hostVeth: string,
  eniMacs: Set<string> = new Set(),
): string[] {
  return deleteOwnLink(host, "host", hostVeth, eniMacs);
}

/**
 * Deletes `to ip lookup main` and `from ip lookup *` at the datapath's priorities — unless a
 * route `ip/32` is still in main, which means another attachment holds the IP now.
 */
export function deletePodRules(host: NetlinkSocket, ip: string): void {
  const cidr = `${ip}/32`;
  if (
    listRoutes(host, { table: MAIN_TABLE, family: 4 }).some((r) =>
      r.dst === cidr && r.type !== "local"
    )
  ) {
    return;
  }
  for (const r of listRules(host, 4)) {
    const mine = (r.priority === RULE_PRIORITY_TO_POD && r.dst === cidr && !r.src) ||
      (r.priority === RULE_PRIORITY_FROM_POD && r.src === cidr && !r.dst);
    if (mine) {
      ignoreMissing(
        `host: delete rule ${r.priority}`,
        () =>
          deleteRule(host, {
            priority: r.priority,
            table: r.table,
            src: r.src,
            dst: r.dst,
            oif: r.oif,
          }),
      );
    }
  }
}
