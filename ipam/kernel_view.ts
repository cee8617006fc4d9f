/**
 * What the daemon reads from the node's kernel: whether a pod's netns still exists, and which
 * addresses the host still routes to pods. The second is the backstop for a lost checkpoint
 * (deleted, or moved aside after corruption): every pod the CNI plugin set up has the host
 * rule `to <ip>/32 lookup main` at a fixed priority and a `<ip>/32` route in main over its
 * host veth. The route dies with the pod's netns (a veth pair goes as one); the rule does
 * not. An address with both belongs to a running pod even when no allocation names it, and
 * must not be handed out again; a rule alone is a leftover of a pod whose DEL never ran.
 *
 * @module
 */
import { listRoutes, listRules, MAIN_TABLE, NetlinkSocket } from "../netlink/mod.ts";
import { RULE_PRIORITY_TO_POD } from "../cni/datapath/types.ts";
import { log } from "./log.ts";

/** What an allocation says of its pod's netns. */
export interface PodNetns {
  /** The runtime's `CNI_NETNS`. */
  netns?: string;
  /** The daemon's mount namespace did not reach `netns` at the ADD. */
  netnsHidden?: boolean;
}

/** What the kernel can tell about the node's pods. */
export interface KernelView {
  /**
   * true: the pod's netns exists; false: it is gone; undefined: cannot tell — always for a
   * pod whose netns the daemon's mount namespace does not reach (`netnsHidden`: the plugin
   * handed it over, ipam/netns_fds.ts), where a missing path says nothing about the pod.
   */
  podAlive(pod: PodNetns): Promise<boolean | undefined>;
  /**
   * Addresses the host routes to a running pod (the datapath's per-pod rule and host route),
   * or undefined when they cannot be read. Pods set up by another main plugin (vpcni as IPAM only) have
   * no such rule and are not seen here.
   */
  routedPodIps(): Promise<Set<string> | undefined>;
  /**
   * Addresses that still have the datapath's per-pod host rule, route or not (a pod whose DEL
   * has not run yet), or undefined when the rules cannot be read.
   */
  ruledPodIps(): Promise<Set<string> | undefined>;
}

/**
 * The kernel as the daemon sees it from its own netns (the host's: the daemon runs with host
 * networking), or from `netnsPath` when given (the demo's and the tests' node namespaces).
 */
export function hostKernelView(netnsPath?: string): KernelView {
  // A read that keeps failing the same way is logged once, not on every warm-loop step.
  let lastRoutesError: string | undefined;
  const read = <T>(fn: (sock: NetlinkSocket) => T): T | undefined => {
    let sock: NetlinkSocket | undefined;
    try {
      sock = netnsPath ? NetlinkSocket.openIn(netnsPath) : NetlinkSocket.open();
      const out = fn(sock);
      lastRoutesError = undefined;
      return out;
    } catch (e) {
      const error = String(e);
      if (error !== lastRoutesError) {
        log.warn("cannot read the routes and rules to pods from the kernel: {error}", {
          netns: netnsPath ?? "(the daemon's own)",
          error,
        });
      }
      lastRoutesError = error;
      return undefined;
    } finally {
      sock?.close();
    }
  };
  return {
    async podAlive({ netns, netnsHidden }) {
      if (!netns || netnsHidden) return undefined;
      try {
        await Deno.stat(netns);
        return true;
      } catch (e) {
        if (e instanceof Deno.errors.NotFound) return false;
        log.warn("cannot tell whether pod netns {netns} exists: {error}", {
          netns,
          error: String(e),
        });
        return undefined;
      }
    },
    routedPodIps() {
      return Promise.resolve(read((sock) => {
        const viaLink = new Set(
          listRoutes(sock, { table: MAIN_TABLE, family: 4 })
            .filter((r) => r.dst.endsWith("/32") && r.dev !== undefined && !r.gateway)
            .filter((r) => r.type === undefined || r.type === "unicast")
            .map((r) => r.dst.slice(0, -3)),
        );
        return new Set([...ruled(sock)].filter((ip) => viaLink.has(ip)));
      }));
    },
    ruledPodIps() {
      return Promise.resolve(read(ruled));
    },
  };
}

/** Addresses with the datapath's `to <ip>/32 lookup main` rule at its fixed priority. */
function ruled(sock: NetlinkSocket): Set<string> {
  const ips = new Set<string>();
  for (const r of listRules(sock, 4)) {
    if (r.priority !== RULE_PRIORITY_TO_POD || r.src || !r.dst?.endsWith("/32")) continue;
    if (r.table === MAIN_TABLE) ips.add(r.dst.slice(0, -3));
  }
  return ips;
}
