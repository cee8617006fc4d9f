/**
 * Errors the datapath throws. The CNI plugin maps {@linkcode DatapathInputError} to the CNI
 * "invalid config" code and everything else to an I/O failure.
 *
 * @module
 */

/** The request was refused before anything was changed: bad config, address or name. */
export class DatapathInputError extends Error {
  /** `message` names the field and what is allowed. */
  constructor(message: string) {
    super(message);
    this.name = "DatapathInputError";
  }
}

/**
 * A kernel operation failed while building or tearing down a pod's datapath. For ADD the
 * objects made so far have already been removed when this is thrown; `cause` is the
 * underlying netlink error.
 */
export class DatapathError extends Error {
  /** `step` says what was being done, e.g. "pod: rename tmp1a2b… to eth0". */
  constructor(readonly step: string, cause: unknown) {
    super(`${step}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "DatapathError";
  }
}

/** The pod's address is one no pod may have (loopback, broadcast, the node's own, …). */
export class UnusableAddressError extends DatapathInputError {
  /** `reason` says what the address is, e.g. "a loopback address (127.0.0.0/8)". */
  constructor(readonly ip: string, readonly reason: string) {
    super(`${ip} is ${reason}; no pod may have it`);
    this.name = "UnusableAddressError";
  }
}

/** `CNI_IFNAME` already names a link in the pod's netns: ADD would clash with it. */
export class IfNameTakenError extends DatapathInputError {
  /** `ifName` is the pod interface asked for, `netns` the pod netns that has it. */
  constructor(readonly ifName: string, readonly netns: string) {
    super(`interface ${ifName} already exists in ${netns}`);
    this.name = "IfNameTakenError";
  }
}
