/**
 * Retry policy for EC2 calls: which failures are worth another attempt, and full-jitter
 * exponential backoff between attempts (sleep a uniform random time in
 * `[0, min(cap, base × 2^attempt))`), which spreads retries of many clients apart.
 *
 * A throttled attempt waits longer than a failed one: EC2 answers throttling when the
 * account's bucket of the action is empty, which the next few hundred milliseconds rarely
 * change, while a 5xx is one server's hiccup. So a throttled retry waits for a token of
 * the action's client-side bucket, which the throttle has just slowed (aws/throttle.ts),
 * on top of the jitter; {@linkcode retryDelay} adds the two, and the call's deadline counts
 * both. A call whose bucket paces it slower than the longest backoff, or past its deadline,
 * gives up at once instead of holding its caller for a retry it may not send; the caller's
 * next call waits for the bucket.
 *
 * @module
 */

/** Backoff and attempt limits. */
export interface RetryPolicy {
  /** Attempts in total, the first included (>= 1). */
  maxAttempts: number;
  /** Backoff base in ms. */
  baseDelayMs: number;
  /** Ceiling of one backoff in ms. */
  maxDelayMs: number;
  /** No new attempt starts after this many ms since the call began. */
  deadlineMs: number;
}

/** Defaults: 6 attempts, 200 ms base, 10 s ceiling, 30 s per call. */
export const DEFAULT_RETRY: Readonly<RetryPolicy> = Object.freeze({
  maxAttempts: 6,
  baseDelayMs: 200,
  maxDelayMs: 10_000,
  deadlineMs: 30_000,
});

/** Error codes EC2 uses for throttling. */
export const THROTTLE_CODES: ReadonlySet<string> = new Set([
  "RequestLimitExceeded",
  "Throttling",
  "ThrottlingException",
  "TooManyRequestsException",
]);

/** Codes of transient failures: server-side (usually with a 5xx status) and network-level. */
export const TRANSIENT_CODES: ReadonlySet<string> = new Set([
  "InternalError",
  "InternalFailure",
  "ServiceUnavailable",
  "Unavailable",
  "RequestTimeout",
  "NetworkError",
  "EndpointUnreachable",
  "Timeout",
]);

/** Full-jitter delay before attempt number `attempt + 1` (attempt counts from 0). */
export function fullJitterDelay(
  attempt: number,
  p: Pick<RetryPolicy, "baseDelayMs" | "maxDelayMs">,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(p.maxDelayMs, p.baseDelayMs * 2 ** attempt);
  return Math.floor(random() * ceiling);
}

/**
 * Milliseconds before attempt number `attempt + 1` after a failure with `code`: the jitter,
 * plus `paceMs` (the wait for a token of the action's bucket) when EC2 throttled. Undefined
 * when EC2 throttled and the bucket paces the action slower than the policy's longest
 * backoff (`maxDelayMs`): the call gives up instead of holding its caller, whose next call
 * waits for the bucket.
 */
export function retryDelay(
  code: string,
  attempt: number,
  p: Pick<RetryPolicy, "baseDelayMs" | "maxDelayMs">,
  paceMs: number,
  random: () => number = Math.random,
): number | undefined {
  const jitterMs = fullJitterDelay(attempt, p, random);
  if (!THROTTLE_CODES.has(code)) return jitterMs;
  return paceMs > p.maxDelayMs ? undefined : paceMs + jitterMs;
}

/** Whether a failure with this code / HTTP status should be tried again. */
export function isRetryable(code: string, httpStatus?: number): boolean {
  return THROTTLE_CODES.has(code) || TRANSIENT_CODES.has(code) ||
    (httpStatus !== undefined && httpStatus >= 500);
}

/** Checks a partial policy and merges it over the defaults. */
export function resolveRetry(over: Partial<RetryPolicy> = {}): RetryPolicy {
  const p = { ...DEFAULT_RETRY, ...over };
  if (!Number.isInteger(p.maxAttempts) || p.maxAttempts < 1) {
    throw new RangeError(`maxAttempts must be an integer >= 1, got ${p.maxAttempts}`);
  }
  for (const k of ["baseDelayMs", "maxDelayMs", "deadlineMs"] as const) {
    if (!(p[k] >= 0) || !Number.isFinite(p[k])) {
      throw new RangeError(`${k} must be a finite number >= 0, got ${p[k]}`);
    }
  }
  return p;
}
