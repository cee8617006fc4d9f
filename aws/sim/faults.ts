/**
 * Fault injection for the simulator: AWS-shaped throttling (a token bucket per API action,
 * sized by the action's category), random throttling and 5xx, per-action latency, and the
 * timing knobs for eventual consistency, attach and IMDS propagation.
 *
 * @module
 */
import { DEFAULT_BUCKETS } from "../throttle.ts";

/** Token bucket size and refill rate. */
export interface BucketSpec {
  capacity: number;
  refillPerSecond: number;
}

/** The EC2 request-rate categories the simulator distinguishes. */
export type ActionCategory = "nonMutating" | "unfilteredNonMutating" | "mutating";

/** Everything the simulator can inject; every field is mutable while the sim runs. */
export interface FaultConfig {
  /** Throttle with a token bucket per action (AWS request-rate limiting). Off by default. */
  throttle: boolean;
  /**
   * Throttle with the account's buckets as AWS publishes them, per action
   * ({@linkcode AWS_ACCOUNT_BUCKETS}): one bucket per action shared by every client of the
   * simulator, as EC2 keeps one per account and Region. Overrides `throttle` and `buckets`
   * (`actionBuckets` still win). Off by default.
   */
  accountLimits: boolean;
  /** Bucket per category; AWS's published defaults unless overridden. */
  buckets: Record<ActionCategory, BucketSpec>;
  /** Per-action bucket overrides, e.g. `{ AssignPrivateIpAddresses: { capacity: 2, refillPerSecond: 1 } }`. */
  actionBuckets: Record<string, BucketSpec>;
  /** Probability in [0,1] that any EC2 request is answered RequestLimitExceeded (503). */
  throttleProbability: number;
  /** Probability in [0,1] that any EC2 request fails with InternalError (500) or Unavailable (503). */
  errorRate: number;
  /** Added latency in ms, per action; `default` applies to actions not listed. */
  latencyMs: Record<string, number>;
  /** A new ENI is invisible this long (ms): left out of Describe, NotFound when named. */
  consistencyDelayMs: number;
  /** An attachment stays "attaching" this long (ms) before it is "attached". */
  attachDelayMs: number;
  /** IMDS shows a newly attached ENI or a newly assigned IP this long (ms) after the fact. */
  imdsDelayMs: number;
}

/** AWS's published request-rate buckets for the EC2 API categories. */
export const AWS_DEFAULT_BUCKETS: Record<ActionCategory, BucketSpec> = {
  nonMutating: { capacity: 100, refillPerSecond: 20 },
  unfilteredNonMutating: { capacity: 50, refillPerSecond: 10 },
  mutating: { capacity: 200, refillPerSecond: 5 },
};

/**
 * The account-level request-rate buckets EC2 documents ("Request throttling for the Amazon
 * EC2 API"): per category, and the ENI and address actions with their own numbers.
 */
export const AWS_ACCOUNT_BUCKETS: {
  categories: Record<ActionCategory, BucketSpec>;
  actions: Record<string, BucketSpec>;
} = {
  // The same published numbers the EC2 client paces itself by: one table, read by both.
  categories: {
    nonMutating: DEFAULT_BUCKETS.nonMutating,
    unfilteredNonMutating: DEFAULT_BUCKETS.unfilteredNonMutating,
    mutating: DEFAULT_BUCKETS.mutating,
  },
  actions: DEFAULT_BUCKETS.actions,
};

/** A fault config with nothing injected. */
export function defaultFaults(): FaultConfig {
  return {
    throttle: false,
    accountLimits: false,
    buckets: structuredClone(AWS_DEFAULT_BUCKETS),
    actionBuckets: {},
    throttleProbability: 0,
    errorRate: 0,
    latencyMs: {},
    consistencyDelayMs: 0,
    attachDelayMs: 0,
    imdsDelayMs: 0,
  };
}

/** The outcome the fault layer chose for one request. */
export type FaultDecision =
  | { kind: "pass" }
  | { kind: "error"; status: number; code: string; message: string };

interface Bucket {
  tokens: number;
  last: number;
  spec: BucketSpec;
}

/** Applies a {@linkcode FaultConfig} to requests; keeps one token bucket per action. */
export class FaultInjector {
  #buckets = new Map<string, Bucket>();
  #random: () => number;
  #clock: () => number;

  /**
   * `random` is injectable so tests can make probabilistic faults deterministic; `clock` (ms)
   * so a bench can run the buckets on a scaled clock.
   */
  constructor(
    readonly config: FaultConfig,
    random: () => number = Math.random,
    clock: () => number = () => performance.now(),
  ) {
    this.#random = random;
    this.#clock = clock;
  }

  /** Empties the bucket state, e.g. after the bucket sizes changed. */
  resetBuckets(): void {
    this.#buckets.clear();
  }

  /** Decides whether this request passes or fails with an injected error. */
  decide(action: string, category: ActionCategory, now = this.#clock()): FaultDecision {
    const c = this.config;
    if ((c.throttle || c.accountLimits) && !this.#take(action, category, now)) return throttled();
    if (c.throttleProbability > 0 && this.#random() < c.throttleProbability) return throttled();
    if (c.errorRate > 0 && this.#random() < c.errorRate) {
      return this.#random() < 0.5
        ? {
          kind: "error",
          status: 500,
          code: "InternalError",
          message: "An internal error has occurred",
        }
        : {
          kind: "error",
          status: 503,
          code: "Unavailable",
          message: "The server is overloaded and can't handle the request.",
        };
    }
    return { kind: "pass" };
  }

  /** Latency to add before answering this action, in ms. */
  latencyFor(action: string): number {
    return this.config.latencyMs[action] ?? this.config.latencyMs.default ?? 0;
  }

  #take(action: string, category: ActionCategory, now: number): boolean {
    const c = this.config;
    const spec = c.actionBuckets[action] ??
      (c.accountLimits
        ? AWS_ACCOUNT_BUCKETS.actions[action] ?? AWS_ACCOUNT_BUCKETS.categories[category]
        : c.buckets[category]);
    const key = `${action}/${category}`;
    let b = this.#buckets.get(key);
    if (
      !b || b.spec.capacity !== spec.capacity || b.spec.refillPerSecond !== spec.refillPerSecond
    ) {
      b = { tokens: spec.capacity, last: now, spec: { ...spec } };
      this.#buckets.set(key, b);
    }
    b.tokens = Math.min(spec.capacity, b.tokens + ((now - b.last) / 1000) * spec.refillPerSecond);
    b.last = now;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }
}

function throttled(): FaultDecision {
  return {
    kind: "error",
    status: 503,
    code: "RequestLimitExceeded",
    message: "Request limit exceeded.",
  };
}
