/**
 * The engine under every EC2 action: wait for a token of the action's bucket, send one
 * attempt with a hard time limit, count it, and retry throttling, 5xx and network failures
 * with full-jitter backoff until the attempts or the deadline run out. A throttled retry also
 * waits for a token of the bucket the throttle slowed; that wait counts against the deadline,
 * and one longer than the longest backoff ends the call (aws/retry.ts). The SDK's own retry
 * is switched off (`maxAttempts: 1`) so every HTTP request passes through here and is counted.
 *
 * Also the contract between the client and its actions: {@linkcode Ec2Caller} is what the
 * action functions (`ec2_describe.ts`, `ec2_eni.ts`) ask of `Ec2Client`, so they build
 * requests and read answers without knowing the SDK client, the engine or the buckets.
 *
 * @module
 */
import { Ec2Error, toEc2Error } from "./ec2_errors.ts";
import { isRetryable, retryDelay, type RetryPolicy, THROTTLE_CODES } from "./retry.ts";
import type { ActionLimiter } from "./throttle.ts";

/** Counters of every EC2 call, in a shape a Prometheus exporter can read directly. */
export interface Ec2Metrics {
  /** HTTP requests per action (every attempt counts). */
  calls: Map<string, number>;
  /** Failed attempts per `Action:Code`. */
  errors: Map<string, number>;
  /** Attempts EC2 answered with a throttling code. */
  throttles: number;
  /** Attempts that were retries. */
  retries: number;
  /** Total time spent waiting for client-side tokens, in ms. */
  throttleWaitMs: number;
}

/** What the caller is told before each retry (for a log line). */
export interface RetryEvent {
  action: string;
  attempt: number;
  delayMs: number;
  error: Ec2Error;
}

/** Settings of a {@linkcode CallEngine}. */
export interface CallEngineOptions {
  endpoint: string;
  limiter: ActionLimiter;
  retry: RetryPolicy;
  /** Hard limit of one attempt in ms. */
  attemptTimeoutMs: number;
  onRetry?: (e: RetryEvent) => void;
  random?: () => number;
}

/** One call: `send` performs a single attempt (the signal aborts it). */
export interface CallSpec<T> {
  action: string;
  /** Whether the request carries a filter, ids or paging (for the bucket category). */
  filtered: boolean;
  send: (signal: AbortSignal) => Promise<T>;
  /**
   * Consulted when a retry (not the first attempt) fails with a non-retryable error: an
   * earlier attempt may have succeeded with its answer lost. Return a result to treat the
   * call as done, or `undefined` to throw the error.
   */
  recover?: (e: Ec2Error) => Promise<T | undefined>;
  /** Makes an otherwise final error retryable (e.g. NotFound on an ENI created a moment ago). */
  retryIf?: (e: Ec2Error) => boolean;
}

/** Sends EC2 calls through throttling, retries and counters. */
export class CallEngine {
  readonly metrics: Ec2Metrics = {
    calls: new Map(),
    errors: new Map(),
    throttles: 0,
    retries: 0,
    throttleWaitMs: 0,
  };
  #o: CallEngineOptions;

  /** Creates the engine. */
  constructor(o: CallEngineOptions) {
    this.#o = o;
  }

  /** Runs `spec` until it succeeds or fails for good; throws {@linkcode Ec2Error}. */
  async run<T>(spec: CallSpec<T>): Promise<T> {
    const { retry, limiter } = this.#o;
    const started = performance.now();
    for (let attempt = 0;; attempt++) {
      this.metrics.throttleWaitMs += await limiter.acquire(spec.action, spec.filtered);
      bump(this.metrics.calls, spec.action);
      if (attempt > 0) this.metrics.retries++;
      let err: Ec2Error;
      try {
        const answer = await this.#attempt(spec);
        limiter.feedback(spec.action, spec.filtered, false);
        return answer;
      } catch (e) {
        err = toEc2Error(spec.action, e, this.#o.endpoint, attempt + 1);
      }
      bump(this.metrics.errors, `${spec.action}:${err.code}`);
      if (THROTTLE_CODES.has(err.code)) {
        this.metrics.throttles++;
        limiter.feedback(spec.action, spec.filtered, true);
      }
      let waiting = false;
      if (!isRetryable(err.code, err.httpStatus)) {
        // An earlier attempt may have done the work with its answer lost: ask first.
        if (attempt > 0 && spec.recover) {
          const r = await spec.recover(err);
          if (r !== undefined) return r;
        }
        // A `retryIf` error is waited out (until the predicate or the deadline says stop),
        // not limited by maxAttempts: it says "not yet", not "something is wrong".
        waiting = !!spec.retryIf?.(err);
        if (!waiting) throw withAttempts(err, attempt + 1);
      }
      // The attempt number drives the jitter; `retryIf` waits keep it short.
      const delayMs = retryDelay(
        err.code,
        waiting ? Math.min(attempt, 3) : attempt,
        retry,
        limiter.waitMs(spec.action, spec.filtered),
        this.#o.random,
      );
      const elapsed = performance.now() - started;
      if (
        delayMs === undefined || (!waiting && attempt + 1 >= retry.maxAttempts) ||
        elapsed + delayMs >= retry.deadlineMs
      ) {
        throw withAttempts(err, attempt + 1, true);
      }
      this.#o.onRetry?.({ action: spec.action, attempt: attempt + 1, delayMs, error: err });
      // After a throttle the sleep covers the slowed bucket's refill, the jitter comes on top.
      await new Promise((r) => setTimeout(r, delayMs));
    }
  }

  async #attempt<T>(spec: CallSpec<T>): Promise<T> {
    const ac = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const e = new Error(`no answer within ${this.#o.attemptTimeoutMs} ms`);
        e.name = "TimeoutError";
        ac.abort(e);
        reject(e);
      }, this.#o.attemptTimeoutMs);
    });
    try {
      return await Promise.race([spec.send(ac.signal), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}

function bump(m: Map<string, number>, k: string): void {
  m.set(k, (m.get(k) ?? 0) + 1);
}

function withAttempts(e: Ec2Error, attempts: number, gaveUp = false): Ec2Error {
  if (e.attempts === attempts && !gaveUp) return e;
  const out = new Ec2Error({
    action: e.action,
    code: e.code,
    message: (gaveUp && attempts > 1 ? `gave up after ${attempts} attempts: ` : "") + e.detail,
    requestId: e.requestId,
    httpStatus: e.httpStatus,
    attempts,
    cause: e.cause,
  });
  return out;
}

/** The counters as plain JSON (for an introspection endpoint or a log line). */
export function metricsSnapshot(m: Ec2Metrics): {
  calls: Record<string, number>;
  errors: Record<string, number>;
  throttles: number;
  retries: number;
  throttleWaitMs: number;
} {
  return {
    calls: Object.fromEntries(m.calls),
    errors: Object.fromEntries(m.errors),
    throttles: m.throttles,
    retries: m.retries,
    throttleWaitMs: Math.round(m.throttleWaitMs),
  };
}

/** One request of an action, as an action function hands it to {@linkcode Ec2Caller.call}. */
export interface ActionCall<O, T = O> {
  action: string;
  /** Builds the SDK command; called again for every attempt. */
  command: () => unknown;
  /**
   * Ids the request names. NotFound on one of them that this client created a moment ago is
   * EC2's eventual consistency, so it is waited out instead of thrown.
   */
  eniIds?: string[];
  /** Reads the answer within the attempt: what it throws is that attempt's failure. */
  read?: (o: O) => T;
  /** As {@linkcode CallSpec.recover}. */
  recover?: (e: Ec2Error) => Promise<T | undefined>;
}

/** A Describe over all its pages, as handed to {@linkcode Ec2Caller.pages}. */
export interface PagedCall<O, R> {
  action: string;
  /** Builds the SDK command of the page at `token` (`undefined`: the first page). */
  command: (token: string | undefined) => unknown;
  /** The items of one page's answer. */
  items: (o: O) => R[];
  /** As {@linkcode ActionCall.eniIds}. */
  eniIds?: string[];
}

/** What the action functions ask of the client. */
export interface Ec2Caller {
  /** Page size of Describe calls. */
  readonly pageSize: number;
  /** Sends one request through throttling, retries and counters; throws {@linkcode Ec2Error}. */
  call<O, T = O>(c: ActionCall<O, T>): Promise<T>;
  /** Sends every page of a Describe, each as {@linkcode Ec2Caller.call} would. */
  pages<O extends { NextToken?: string }, R>(p: PagedCall<O, R>): Promise<R[]>;
  /** Notes an ENI this client created (see {@linkcode ActionCall.eniIds}). */
  noteCreated(eniId: string): void;
  /** Forgets an ENI this client deleted. */
  forgetCreated(eniId: string): void;
}
