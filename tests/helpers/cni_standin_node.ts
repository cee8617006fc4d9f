/**
 * A stand-in IPAM daemon (ipam_standin.ts) set up for one CNI test node, and the network
 * config that points the plugin at it: the set-up most CNI plugin tests start with.
 *
 * @module
 */
import { type IpamStandin, type StandinOptions, startIpamStandin } from "./ipam_standin.ts";

/** What the stand-in needs of a CNI test node: its scratch dir and its netns. */
export interface StandinHost {
  /** Scratch dir of the node; the socket goes here. */
  dir: string;
  /** The node's netns, where the plugin runs. */
  node: { path: string };
}

/** A stand-in daemon started for a test node, with the socket it listens on. */
export interface NodeStandin extends IpamStandin {
  /** The daemon's socket, `<node dir>/ipam.sock`. */
  readonly socket: string;
}

/**
 * Starts a stand-in daemon for `host`: it listens on `<host.dir>/ipam.sock` and its workers
 * act from the node's netns, as the daemon acts from the node's netns on a real node.
 */
export function startNodeStandin(
  host: StandinHost,
  opts: Omit<StandinOptions, "socket" | "nodeNetns">,
): NodeStandin {
  const socket = `${host.dir}/ipam.sock`;
  const standin = startIpamStandin({ ...opts, nodeNetns: host.node.path, socket });
  return {
    socket,
    reservations: standin.reservations,
    requests: standin.requests,
    close: () => standin.close(),
  };
}

/**
 * The network config of vpcni as the main plugin on the veth datapath at MTU 1500 (CNI
 * 1.1.0), asking the daemon at `socket`; `extra` keys are added or replace these.
 */
export function vethDaemonConf(
  name: string,
  socket: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    cniVersion: "1.1.0",
    name,
    type: "vpcni",
    datapath: "veth",
    mtu: 1500,
    daemonSocket: socket,
    ...extra,
  };
}
