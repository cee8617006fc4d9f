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

import { CniError, ErrorCode } from "../proto/errors.ts";

export { CniError, ErrorCode };

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
