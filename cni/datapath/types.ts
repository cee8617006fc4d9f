/**
 * Shapes of the datapath API: what the CNI plugin hands to {@linkcode attachPod} and friends
 * in `cni/datapath/mod.ts`, and what it gets back. Types and constants only; no npm imports
 * (the plugin loads this on its hot path).
 *
 * @module
 */
import type { EniInfo } from "../../proto/ipam.ts";

export type { EniInfo };

/** Which datapath wires the pod: see README.md, "Datapaths". */
export type DatapathKind = "ipvlan-l2" | "ipvlan-l3s" | "veth";

/** Every datapath kind, for config validation. */
export const DATAPATH_KINDS: readonly DatapathKind[] = ["ipvlan-l2", "ipvlan-l3s", "veth"];

/** Datapath settings from the network configuration. */
export interface DatapathConfig {
  /** Which datapath to build. */
  kind: DatapathKind;
  /**
   * MTU of the pod interface and host veth, bounded by the MTU of the ENI's link (or the
   * ipvlan parent): the datapath never changes that link's MTU for a pod.
   */
  mtu: number;
  /** ipvlan: CIDRs routed over the unnumbered host veth (kube-proxy ClusterIPs). */
  serviceCidrs: string[];
  /** ipvlan: node addresses routed over the host veth (kubelet probes, hostNetwork pods). */
  nodeIps: string[];
  /** Host-side link name prefix (default "vpc"); the name is prefix + 11 hex chars of a hash. */
  hostVethPrefix: string;
  /**
   * MACs of the node's ENIs (from the IPAM daemon). A link with one of them is never
   * deleted, renamed or changed, in any netns, whatever its name.
   */
  eniMacs?: string[];
}

/**
 * An ENI as the datapath takes it: {@linkcode EniInfo} plus, optionally, the ENI's own
 * primary address. When given, a secondary ENI's link carries it (without a subnet route in
 * main), so the link's own ARP requests have a sender address the VPC knows it owns.
 */
export interface DatapathEni extends EniInfo {
  /** The ENI's primary private IPv4 address (not a pod address). */
  primaryIp?: string;
}

/** Where the pod's IP comes from (a daemon allocation or a delegated IPAM plugin). */
export interface PodAddress {
  /** The pod's IPv4 address, without prefix, e.g. "10.0.1.23". */
  ip: string;
  /** Prefix length of the subnet (ipvlan puts it on the pod side; veth always uses /32). */
  prefixLen: number;
  /** The subnet's gateway. */
  gateway: string;
  /** The ENI that owns `ip`; absent means the primary ENI and the main table. */
  eni?: DatapathEni;
  /** ipvlan parent link name when `eni` is absent (default: the link of the default route). */
  master?: string;
}

/** One pod attachment to build (ADD) or verify (CHECK). */
export interface PodAttachment {
  containerId: string;
  ifName: string;
  /** Path of the pod's network namespace, e.g. /var/run/netns/cni-…. */
  netns: string;
  address: PodAddress;
}

/** One pod attachment to tear down (DEL); anything may be missing. */
export interface PodDetachment {
  containerId: string;
  ifName: string;
  netns?: string;
  address?: PodAddress;
}

/** What ADD built: enough for the plugin to write a CNI result of any version. */
export interface AttachResult {
  /** Host-side link first (no sandbox), then the pod interface (sandbox = netns path). */
  interfaces: { name: string; mac: string; sandbox?: string; mtu?: number }[];
  /** `address` is a CIDR; `interface` indexes `interfaces`. */
  ips: { address: string; gateway?: string; interface: number }[];
  routes: { dst: string; gw?: string }[];
}

/** Priority of `to <podIP> lookup main`: traffic to a pod always uses the main table. */
export const RULE_PRIORITY_TO_POD = 1000;

/** Priority of `from <podIP> lookup T(E)`: pod traffic leaves by its own ENI. */
export const RULE_PRIORITY_FROM_POD = 2000;

/** T(E) = ENI_TABLE_BASE + device index, for every ENI but the primary (which uses main). */
export const ENI_TABLE_BASE = 100;

/** The main routing table. */
export const MAIN_TABLE_ID = 254;

/** The link-local gateway the veth datapath gives every pod. */
export const VETH_POD_GATEWAY = "169.254.1.1";
