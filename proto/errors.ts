/**
 * The CNI error codes vpcni speaks and the error that carries one: shared by the plugin, the
 * daemon (which answers with these codes over proto/ipam.ts) and the validator both parse
 * with (proto/schema.ts). The codes' meanings are tabled in cni/errors.ts and cni/README.md.
 *
 * @module
 */

/** The spec's well-known error codes, plus vpcni's own (≥ 100). */
export const ErrorCode = {
  /** Incompatible CNI version. */
  INCOMPATIBLE_VERSION: 1,
  /** Unsupported field in the network configuration; the message names the key and value. */
  UNSUPPORTED_FIELD: 2,
  /** Container unknown or does not exist; the runtime need not clean up. */
  UNKNOWN_CONTAINER: 3,
  /** Invalid necessary environment variables; the message names the variable. */
  INVALID_ENV: 4,
  /** I/O failure, e.g. reading stdin. */
  IO_FAILURE: 5,
  /** Failed to decode content, e.g. stdin that is not JSON. */
  DECODE_FAILURE: 6,
  /** Invalid network configuration; the message names the field. */
  INVALID_CONFIG: 7,
  /** Try again later: a transient condition such as an unreachable IPAM daemon. */
  TRY_AGAIN_LATER: 11,
  /** STATUS: the plugin cannot serve an ADD now. */
  PLUGIN_NOT_AVAILABLE: 50,
  /** STATUS: no addresses can be had; existing pods may have limited connectivity. */
  PLUGIN_NOT_AVAILABLE_LIMITED: 51,
  /** The kernel refused a datapath object. */
  DATAPATH_FAILED: 100,
  /** CHECK found problems. */
  CHECK_FAILED: 101,
  /** The IPAM daemon spoke outside the protocol. */
  DAEMON_PROTOCOL: 102,
  /** A delegated IPAM plugin failed without a CNI error. */
  IPAM_PLUGIN_FAILED: 103,
  /** CHECK: reservation and prevResult disagree. */
  RESERVATION_MISMATCH: 104,
  /** The IPAM result has no IPv4 address a pod may have. */
  NO_IPV4_ADDRESS: 105,
  /** ADD for an attachment that already holds an address: the spec wants DEL first. */
  ATTACHMENT_EXISTS: 106,
  /** An unexpected exception. */
  INTERNAL: 999,
} as const;

/** A CNI error: what the runtime receives as `{cniVersion, code, msg, details}`. */
export class CniError extends Error {
  /** The CNI error code. */
  readonly code: number;
  /** Longer explanation, optional. */
  readonly details?: string;

  /** Makes an error with a code, a short message and optional details. */
  constructor(code: number, msg: string, details?: string) {
    super(msg);
    this.name = "CniError";
    this.code = code;
    this.details = details;
  }
}
