/**
 * The plugin ↔ daemon protocol: one HTTP/1.1 round trip over the daemon's root-only unix
 * socket per ADD, DEL, CHECK, GC or STATUS. Types only, no npm: the plugin imports this on
 * its hot path; the daemon parses the same shapes with zod.
 *
 * Every request is `POST /v1/ipam` with a JSON {@linkcode IpamRequest} body; every answer
 * is a JSON {@linkcode IpamResponse} with HTTP 200 (errors are in the body, not the status,
 * so the plugin can forward the CNI error code unchanged).
 *
 * @module
 */

/** Bumped on any incompatible change; the daemon refuses versions it does not speak. */
export const IPAM_PROTOCOL_VERSION = 1;

/** Where the daemon listens unless configured otherwise. */
export const DEFAULT_IPAM_SOCKET = "/run/vpcni/ipam.sock";

/** The HTTP path every request is posted to. */
export const IPAM_PATH = "/v1/ipam";

/** Identifies one attachment, as CNI does: (network name, container id, interface name). */
export interface AttachmentKey {
  /** The network name from the conflist (`name`). */
  network: string;
  containerId: string;
  ifName: string;
}

/** ADD: reserve an address for a pod. */
export interface IpamAddRequest extends AttachmentKey {
  version: typeof IPAM_PROTOCOL_VERSION;
  op: "add";
  netns: string;
  podNamespace?: string;
  podName?: string;
  podUid?: string;
  /** Pod annotations from the `io.kubernetes.cri.pod-annotations` capability. */
  annotations?: Record<string, string>;
}

/** DEL: release the reservation of an attachment; unknown attachments are a success. */
export interface IpamDelRequest extends AttachmentKey {
  version: typeof IPAM_PROTOCOL_VERSION;
  op: "del";
}

/** CHECK: is this attachment's reservation still held, and with which address? */
export interface IpamCheckRequest extends AttachmentKey {
  version: typeof IPAM_PROTOCOL_VERSION;
  op: "check";
}

/** GC: release every reservation of `network` not listed in `validAttachments`. */
export interface IpamGcRequest {
  version: typeof IPAM_PROTOCOL_VERSION;
  op: "gc";
  network: string;
  validAttachments: { containerId: string; ifName: string }[];
}

/**
 * GC, first half: which reservations of `network` are not in `validAttachments`. Releases
 * nothing: the plugin removes each one's host objects, then DELs it, so no address goes
 * back to the pool while objects still point at it.
 */
export interface IpamStaleRequest {
  version: typeof IPAM_PROTOCOL_VERSION;
  op: "stale";
  network: string;
  validAttachments: { containerId: string; ifName: string }[];
}

/** STATUS: could an ADD be served right now? */
export interface IpamStatusRequest {
  version: typeof IPAM_PROTOCOL_VERSION;
  op: "status";
  /** Pool to ask about; the default pool when absent. */
  pool?: string;
}

/** Any request the daemon accepts. */
export type IpamRequest =
  | IpamAddRequest
  | IpamDelRequest
  | IpamCheckRequest
  | IpamGcRequest
  | IpamStaleRequest
  | IpamStatusRequest;

/** The ENI that owns a pod's address, as the datapath needs it. */
export interface EniInfo {
  /** `eni-…` */
  id: string;
  /** Lower-case colon-separated MAC address; the datapath finds the link by it. */
  mac: string;
  deviceIndex: number;
  /** True for device index 0: its routes stay in the main table. */
  primary: boolean;
  subnetId: string;
  /** e.g. `10.0.1.0/24` */
  subnetCidr: string;
  /** The subnet's router, the first usable address of `subnetCidr`. */
  gateway: string;
  /** Route table holding this ENI's default route (ignored for the primary ENI). */
  routeTable: number;
  /**
   * The ENI's own primary address. The datapath puts it on a secondary ENI's link (with no
   * prefix route) so the link's ARP requests carry a sender address the ENI owns: the VPC
   * drops any other. Optional for compatibility with daemons that do not send it.
   */
  primaryIp?: string;
}

/** One pod's reservation. */
export interface PodAllocation extends AttachmentKey {
  /** The pod's IPv4 address, without prefix. */
  ip: string;
  pool: string;
  eni: EniInfo;
  /** The VPC's CIDR blocks, for routes the datapath installs. */
  vpcCidrs: string[];
  /** The node's own addresses (primary ENI), for the pod → node routes of ipvlan. */
  nodeIps: string[];
  /**
   * MACs (lower case) of every ENI attached to the node, the daemon's and others'. The
   * datapath never deletes, renames or changes a link with one of them, in any netns.
   * Optional for compatibility with daemons that do not send it.
   */
  nodeEniMacs?: string[];
}

/** Answer to ADD and CHECK. */
export interface IpamAllocationResponse {
  ok: true;
  allocation: PodAllocation;
}

/** Answer to DEL: what was released, if anything. */
export interface IpamReleaseResponse {
  ok: true;
  released: PodAllocation[];
}

/** Answer to GC. */
export interface IpamGcResponse {
  ok: true;
  released: PodAllocation[];
}

/** Answer to the `stale` request: reservations GC would release, none released. */
export interface IpamStaleResponse {
  ok: true;
  stale: PodAllocation[];
}

/** Answer to STATUS. */
export interface IpamStatusResponse {
  ok: true;
  pool: string;
  /** Addresses that an ADD could take now without an EC2 call. */
  available: number;
  /** Whether the pool may still grow (ENI or IP limits, subnets not full). */
  canGrow: boolean;
}

/**
 * A refusal. `code` is a CNI error code the plugin passes on as is: 11 (try again later)
 * when no address can be had in time or EC2/IMDS failed, 7 for an unknown pool, 3 for an
 * unknown attachment on CHECK, 5 when the daemon could not write its checkpoint (an ADD then
 * reserved nothing), 50/51 for STATUS, ≥ 100 for vpcni's own codes (see README), among them
 * 999 for a bug in the daemon (`msg` holds its message; the stack is only in the daemon's log).
 */
export interface IpamErrorResponse {
  ok: false;
  code: number;
  msg: string;
  details?: string;
}

/** Any answer. */
export type IpamResponse =
  | IpamAllocationResponse
  | IpamReleaseResponse
  | IpamGcResponse
  | IpamStaleResponse
  | IpamStatusResponse
  | IpamErrorResponse;
