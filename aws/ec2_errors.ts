/**
 * The one error type the EC2 client throws, and the conversion from whatever the SDK or the
 * network threw.
 *
 * @module
 */

/** A failed EC2 call: the action, EC2's error code, the request id and the HTTP status. */
export class Ec2Error extends Error {
  /** The EC2 action, e.g. `CreateNetworkInterface`. */
  readonly action: string;
  /**
   * EC2's error code (`InvalidSubnetID.NotFound`, `RequestLimitExceeded`, …), or for
   * failures below HTTP: `EndpointUnreachable`, `Timeout`, `NetworkError`.
   */
  readonly code: string;
  readonly requestId?: string;
  readonly httpStatus?: number;
  /** The error text alone, without the action and code prefix. */
  readonly detail: string;
  /** Attempts made, the failing one included. */
  readonly attempts: number;

  /** Builds the error; `message` is EC2's own text. */
  constructor(o: {
    action: string;
    code: string;
    message: string;
    requestId?: string;
    httpStatus?: number;
    attempts?: number;
    cause?: unknown;
  }) {
    const where = [o.httpStatus && `HTTP ${o.httpStatus}`, o.requestId && `request ${o.requestId}`]
      .filter(Boolean).join(", ");
    super(`EC2 ${o.action} failed: ${o.code}: ${o.message}${where ? ` (${where})` : ""}`, {
      cause: o.cause,
    });
    this.name = "Ec2Error";
    this.action = o.action;
    this.code = o.code;
    this.detail = o.message;
    if (o.requestId) this.requestId = o.requestId;
    if (o.httpStatus) this.httpStatus = o.httpStatus;
    this.attempts = o.attempts ?? 1;
  }
}

/**
 * A filter the client cannot send: a name the action does not take, a value that is not a
 * non-empty list of strings, or the same filter given twice. Refused before any request, so a
 * filter is never dropped on the way to EC2. `code` is `InvalidFilter`.
 */
export class Ec2FilterError extends Ec2Error {
  /** The filter's name as the caller gave it (`subnet-id`, `tag:zone`, …). */
  readonly filter: string;

  /** Builds the error for `filter` of `action`. */
  constructor(o: { action: string; filter: string; message: string }) {
    super({ action: o.action, code: "InvalidFilter", message: o.message });
    this.name = "Ec2FilterError";
    this.filter = o.filter;
  }
}

/** Codes of network-level failures (no HTTP answer at all). */
const NETWORK_CODES: Record<string, string> = {
  ECONNREFUSED: "EndpointUnreachable",
  EHOSTUNREACH: "EndpointUnreachable",
  ENETUNREACH: "EndpointUnreachable",
  ENOTFOUND: "EndpointUnreachable",
  EAI_AGAIN: "EndpointUnreachable",
  ECONNRESET: "NetworkError",
  EPIPE: "NetworkError",
  ETIMEDOUT: "Timeout",
};

interface SdkErrorLike {
  name?: string;
  code?: string;
  Code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number; requestId?: string };
  $response?: { statusCode?: number };
}

/**
 * Converts anything thrown by an SDK call to an {@linkcode Ec2Error}; `endpoint` goes into
 * the message of network failures, so an operator sees where the client tried to go.
 */
export function toEc2Error(
  action: string,
  e: unknown,
  endpoint: string,
  attempts = 1,
): Ec2Error {
  if (e instanceof Ec2Error) return e;
  const err = (e ?? {}) as SdkErrorLike;
  const status = err.$metadata?.httpStatusCode ?? err.$response?.statusCode;
  const requestId = err.$metadata?.requestId;
  const sysCode = findSysCode(e);
  if (status === undefined && sysCode && NETWORK_CODES[sysCode]) {
    return new Ec2Error({
      action,
      code: NETWORK_CODES[sysCode],
      message: `cannot reach ${endpoint} (${sysCode})`,
      attempts,
      cause: e,
    });
  }
  if (status === undefined && (err.name === "TimeoutError" || err.name === "AbortError")) {
    return new Ec2Error({
      action,
      code: "Timeout",
      message: `no answer from ${endpoint} in time`,
      attempts,
      cause: e,
    });
  }
  let code = err.Code ?? err.name ?? "UnknownError";
  if (code === "Error" || code === "UnknownError" || code === "Unknown") {
    code = status !== undefined && status >= 500
      ? "InternalError"
      : status
      ? `Http${status}`
      : "NetworkError";
  }
  const msg = err.message && err.message !== "UnknownError" ? err.message : "no error message";
  return new Ec2Error({
    action,
    code,
    message: status === undefined && code === "NetworkError" ? `${endpoint}: ${msg}` : msg,
    requestId,
    httpStatus: status,
    attempts,
    cause: e,
  });
}

function findSysCode(e: unknown): string | undefined {
  for (let cur = e as { code?: unknown; cause?: unknown } | undefined, i = 0; cur && i < 5; i++) {
    if (typeof cur.code === "string" && /^E[A-Z_]+$/.test(cur.code)) return cur.code;
    const m = typeof (cur as Error).message === "string" &&
      /\b(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND)\b/.exec(
        (cur as Error).message,
      );
    if (m) return m[1];
    cur = cur.cause as typeof cur;
  }
  return undefined;
}
