/**
 * The plugin ↔ daemon protocol, owned by neither side: one HTTP/1.1 round trip over the
 * daemon's root-only unix socket per request. The types, the versions and the codes a refusal
 * may carry; the validators both sides parse with are in proto/ipam_validate.ts (no npm: the
 * plugin imports both; the thin plugin only this one).
 *
 * Every request is `POST /v1/ipam` with a JSON {@linkcode IpamRequest} body; every answer
 * is a JSON {@linkcode IpamResponse} with HTTP 200 (errors are in the body, not the status,
 * so the plugin can forward the CNI error code unchanged).
 *
 * Two generations of requests: the reservation requests (`add`, `del`, `check`, `gc`,
 * `stale`, `status`) are protocol 1, unchanged since the first release, so a plugin and a
 * daemon of different releases still agree on them; `cni` (the daemon runs a whole CNI
 * invocation, cni/thin.ts) is protocol 2. Every answer names the version it speaks.
 *
 * @module
 */
import { ErrorCode } from "./errors.ts";

/** The version of the reservation requests (`add` … `status`). */
export const IPAM_PROTOCOL_VERSION = 1 as const;

/** The version of the `cni` request: the daemon runs the whole invocation. */
export const CNI_PROTOCOL_VERSION = 2 as const;

/** Every version a daemon of this release speaks. */
export const SPOKEN_PROTOCOL_VERSIONS: readonly number[] = [
  IPAM_PROTOCOL_VERSION,
  CNI_PROTOCOL_VERSION,
];

/** Where the daemon listens unless configured otherwise. */
export const DEFAULT_IPAM_SOCKET = "/run/vpcni/ipam.sock";

/**
 * How long a plugin waits for the daemon's answer unless `daemonTimeoutMs` is configured, for
 * every verb but ADD.
 */
export const DEFAULT_DAEMON_TIMEOUT_MS = 5_000;

/**
 * How long a plugin waits for an ADD's answer unless `daemonTimeoutMs` is configured. An ADD
 * may wait for the pool to grow (the daemon's `addTimeoutSeconds`, and longer when EC2
 * throttles the account), so its bound is the CRI's: the kubelet gives a sandbox 4 minutes,
 * and half of that leaves room for its retry.
 */
export const DEFAULT_ADD_TIMEOUT_MS = 120_000;

/** The largest `daemonTimeoutMs` a configuration may set. */
export const MAX_DAEMON_TIMEOUT_MS = 120_000;

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
  /**
   * How long the plugin waits for this answer, in ms. The daemon stops waiting for an address
   * early enough to answer within it (and to wire the pod when it runs the invocation), so a
   * pod never gets an address its runtime has stopped waiting for. Absent from older plugins:
   * the daemon's `addTimeoutSeconds` alone bounds the wait then.
   */
  waitMs?: number;
  /**
   * The daemon's mount namespace does not reach `netns` (the plugin handed the netns over):
   * the daemon cannot tell from it whether the pod is alive, and never frees the address on
   * that ground.
   */
  netnsHidden?: boolean;
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

/**
 * A whole CNI invocation of the main plugin, forwarded by the thin plugin (cni/thin.ts): the
 * daemon checks and runs it as the plugin would and answers what the plugin prints.
 */
export interface CniRunRequest {
  version: typeof CNI_PROTOCOL_VERSION;
  op: "cni";
  /** The invocation's `CNI_*` variables, as the runtime set them. */
  env: Record<string, string>;
  /** stdin, as text (the plugin refuses more than 1 MiB before forwarding). */
  stdin: string;
  /**
   * The token the daemon's netns socket answered for the pod netns the plugin handed over
   * (ipam/netns_fds.ts): the verb runs on that open netns, as the daemon's mount namespace
   * does not reach `CNI_NETNS`. Sent only after an answer with `needNetnsFd`.
   */
  netnsFd?: string;
}

/** Any request the daemon accepts. */
export type IpamRequest =
  | IpamAddRequest
  | IpamDelRequest
  | IpamCheckRequest
  | IpamGcRequest
  | IpamStaleRequest
  | IpamStatusRequest
  | CniRunRequest;

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
  /** Set on a refusal of a `cni` request: the protocol it is answered in. */
  version?: typeof CNI_PROTOCOL_VERSION;
  code: number;
  msg: string;
  details?: string;
  /**
   * On a `cni` request: the daemon's mount namespace does not reach `CNI_NETNS`. A plugin of
   * this release hands the netns over (cni/netns_fd_send.ts) and sends the invocation again
   * with `netnsFd`; an older one prints `code` and `msg`, which say so.
   */
  needNetnsFd?: boolean;
}

/** Answer to `cni`: what the plugin prints on stdout and its exit code. */
export interface CniRunResponse {
  ok: true;
  version: typeof CNI_PROTOCOL_VERSION;
  /** 0 on success, 1 when `stdout` is the spec's error JSON. */
  exitCode: number;
  /** The result or error JSON, in the request's cniVersion; empty for DEL/CHECK/GC/STATUS. */
  stdout: string;
}

/** Any answer. */
export type IpamResponse =
  | CniRunResponse
  | IpamAllocationResponse
  | IpamReleaseResponse
  | IpamGcResponse
  | IpamStaleResponse
  | IpamStatusResponse
  | IpamErrorResponse;

/** Bound on a daemon answer, in bytes (a GC releasing every pod of a node is ~100 KiB). */
export const MAX_DAEMON_ANSWER_BYTES = 1024 * 1024;

/** Bound on a request body: stdin's 1 MiB bound, its JSON escaping, and the environment. */
export const MAX_REQUEST_BYTES = 4 * 1024 * 1024;

/**
 * The codes a daemon refusal may carry, passed on to the runtime as they are: 3 (unknown
 * attachment on CHECK), 4 and 7 (the request or an annotation is wrong), 5 (the daemon could
 * not write its checkpoint; an ADD reserved nothing), 11 (no address in time, or EC2/IMDS
 * failed: try again), 50 and 51 (STATUS), 106 (ADD of an attachment that already holds an
 * address), 999 (a bug in the daemon, with its message; retrying will not help). Any other
 * code — negative, not an integer, a code of the spec's that means something else here (1 and
 * 6 are the daemon's complaints about the plugin's request, not about the network
 * configuration), or one of vpcni's own — is a protocol error (102).
 */
export const DAEMON_ERROR_CODES: readonly number[] = [
  ErrorCode.UNKNOWN_CONTAINER,
  ErrorCode.INVALID_ENV,
  ErrorCode.IO_FAILURE,
  ErrorCode.INVALID_CONFIG,
  ErrorCode.TRY_AGAIN_LATER,
  ErrorCode.PLUGIN_NOT_AVAILABLE,
  ErrorCode.PLUGIN_NOT_AVAILABLE_LIMITED,
  ErrorCode.ATTACHMENT_EXISTS,
  ErrorCode.INTERNAL,
];

/** The codes the daemon uses for a request it cannot read. */
export const REQUEST_ERROR = {
  /** A protocol version the daemon does not speak. */
  VERSION: ErrorCode.INCOMPATIBLE_VERSION,
  /** Not JSON, or a field missing or malformed. */
  MALFORMED: ErrorCode.DECODE_FAILURE,
} as const;
