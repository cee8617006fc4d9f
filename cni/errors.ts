/**
 * CNI error codes and the error the plugin throws. Every failure the runtime sees is a
 * {@linkcode CniError}: `runPlugin` prints it as the spec's error JSON on stdout.
 *
 * Well-known codes (0–99) come from the CNI specification. vpcni's own codes start at 100:
 *
 * | code | name                | meaning                                                           |
 * |------|---------------------|-------------------------------------------------------------------|
 * | 100  | DATAPATH_FAILED     | the kernel refused a link, address, route, rule or neighbour      |
 * | 101  | CHECK_FAILED        | CHECK found an object missing or wrong; `details` lists each one   |
 * | 102  | DAEMON_PROTOCOL     | the IPAM daemon answered outside the plugin↔daemon protocol       |
 * | 103  | IPAM_PLUGIN_FAILED  | a delegated IPAM plugin failed without a CNI error of its own     |
 * | 104  | RESERVATION_MISMATCH| CHECK: the daemon holds another address than `prevResult` shows   |
 * | 105  | NO_IPV4_ADDRESS     | the IPAM result holds no IPv4 address a pod may have              |
 * | 106  | ATTACHMENT_EXISTS   | ADD for an attachment that already holds an address (no DEL)      |
 * | 999  | INTERNAL            | an unexpected exception (a bug); the stack goes to the log file   |
 *
 * No error the plugin prints carries a JavaScript stack trace: {@linkcode errorJson} drops
 * every line that looks like a stack frame from `msg` and `details`, whatever path made
 * the error.
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

/** The spec's error object, as printed on stdout. */
export interface CniErrorJson {
  cniVersion: string;
  code: number;
  msg: string;
  details?: string;
}

/** Longest `msg` and `details` printed, in characters; longer ones are cut. */
export const MAX_MSG_CHARS = 1024;
/** See {@linkcode MAX_MSG_CHARS}. */
export const MAX_DETAILS_CHARS = 4096;

/**
 * Turns anything thrown into a {@linkcode CniError}. An exception that is not one is a bug:
 * code 999, its message without the stack, and `details` saying what to do; `doing`
 * names the step (e.g. "ADD") so the reader knows what was tried.
 */
export function toCniError(err: unknown, doing = "the request"): CniError {
  if (err instanceof CniError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new CniError(
    ErrorCode.INTERNAL,
    `vpcni failed unexpectedly during ${doing}: ${firstLine(message)}`,
    'this is a bug in vpcni, not in the request. Set "logFile" and "logLevel": "debug" in ' +
      "the network configuration to record where it happened, and report it with that log",
  );
}

function firstLine(s: string): string {
  const nl = s.indexOf("\n");
  return nl < 0 ? s : s.slice(0, nl);
}

/** A line of a JavaScript stack trace ("    at fn (file:///x.ts:1:2)"). */
const STACK_FRAME = /^\s+at\s.*$/;

/** Drops stack-frame lines from `text` and cuts it to `max` characters. */
export function withoutStack(text: string, max: number): string {
  const kept = text.split("\n").filter((l) => !STACK_FRAME.test(l)).join("\n").trimEnd();
  return kept.length > max ? `${kept.slice(0, max)}…` : kept;
}

/**
 * Renders an error as the spec's JSON object in the given CNI version. Stack frames are
 * dropped from `msg` and `details` whatever made the error, and both are bounded.
 */
export function errorJson(err: CniError, cniVersion: string): CniErrorJson {
  const out: CniErrorJson = {
    cniVersion,
    code: err.code,
    msg: withoutStack(err.message, MAX_MSG_CHARS),
  };
  const details = err.details === undefined ? "" : withoutStack(err.details, MAX_DETAILS_CHARS);
  if (details !== "") out.details = details;
  return out;
}
