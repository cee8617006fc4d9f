/**
 * Typed errors for netlink/. Callers branch on the class (or `isNotFound`/`isExists`) to make
 * DEL idempotent and ADD retry-safe, and the message reads like `RTM_NEWLINK eth1: File
 * exists` with the kernel's extended-ack text appended when it sent one.
 *
 * @module
 */

import { errno, strerror } from "../base/libc.ts";

/** Fields of a {@linkcode NetlinkError}. */
export interface NetlinkErrorInit {
  /** Positive errno the kernel (or libc) returned. */
  errno: number;
  /** The request that failed, e.g. "RTM_NEWLINK", or a syscall name like "setns". */
  op: string;
  /** What the request was about: a link name, a CIDR, a rule… */
  subject?: string;
  /** The kernel's extended-ack message, when it sent one. */
  extack?: string;
}

/** A request the kernel (or a syscall) refused. */
export class NetlinkError extends Error {
  /** Positive errno value. */
  readonly errno: number;
  /** The request that failed, e.g. "RTM_NEWLINK". */
  readonly op: string;
  /** What the request was about. */
  readonly subject?: string;
  /** The kernel's extended-ack text. */
  readonly extack?: string;

  /** Builds the error and its message from the errno text. */
  constructor(init: NetlinkErrorInit) {
    const head = init.subject ? `${init.op} ${init.subject}` : init.op;
    let msg = `${head}: ${strerror(init.errno)}`;
    if (init.extack) msg += ` (${init.extack})`;
    super(msg);
    this.name = new.target.name;
    this.errno = init.errno;
    this.op = init.op;
    this.subject = init.subject;
    this.extack = init.extack;
  }
}

/** The object already exists (EEXIST). */
export class ExistsError extends NetlinkError {}
/** The object (or what it refers to) does not exist (ENOENT, ENODEV, ESRCH, EADDRNOTAVAIL…). */
export class NotFoundError extends NetlinkError {}
/** The object is busy (EBUSY). */
export class BusyError extends NetlinkError {}
/** The caller lacks the privilege (EPERM, EACCES). */
export class PermissionError extends NetlinkError {}
/** The kernel found the request invalid (EINVAL, EOPNOTSUPP, ERANGE…). */
export class InvalidError extends NetlinkError {}

/** Input refused before any syscall: a bad interface name, CIDR, MAC, priority, path… */
export class InvalidInputError extends Error {
  /** Builds the error; `message` says what was wrong and what is allowed. */
  constructor(message: string) {
    super(message);
    this.name = "InvalidInputError";
  }
}

const ERRNO_CLASS: Record<number, typeof NetlinkError> = {
  1: PermissionError, // EPERM
  2: NotFoundError, // ENOENT
  3: NotFoundError, // ESRCH: a route that is not there
  13: PermissionError, // EACCES
  16: BusyError, // EBUSY
  17: ExistsError, // EEXIST
  19: NotFoundError, // ENODEV
  22: InvalidError, // EINVAL
  34: InvalidError, // ERANGE
  95: InvalidError, // EOPNOTSUPP
  97: InvalidError, // EAFNOSUPPORT
  99: NotFoundError, // EADDRNOTAVAIL: an address that is not there
};

/** The typed error for an errno, e.g. 17 → {@linkcode ExistsError}. */
export function errorFromErrno(init: NetlinkErrorInit): NetlinkError {
  const Cls = ERRNO_CLASS[init.errno] ?? NetlinkError;
  return new Cls(init);
}

/**
 * The typed error for the errno a libc call just left. Call it right after the failing call:
 * errno is read before anything else is evaluated.
 */
export function lastError(op: string, subject?: string): NetlinkError {
  const code = errno();
  return errorFromErrno({ errno: code, op, subject });
}

/** True when `e` says the object was not there (safe to ignore on DEL). */
export function isNotFound(e: unknown): boolean {
  return e instanceof NotFoundError;
}

/** True when `e` says the object already exists (safe to ignore on an idempotent ADD). */
export function isExists(e: unknown): boolean {
  return e instanceof ExistsError;
}
