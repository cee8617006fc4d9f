/**
 * Client-side token buckets per EC2 action, sized like EC2's own request-rate limits so
 * that the client slows itself down before EC2 starts answering `RequestLimitExceeded`.
 *
 * EC2 evaluates each API action separately, with a bucket whose size and refill rate
 * depend on the action's category. The defaults below are EC2's published defaults
 * ("Request throttling for the Amazon EC2 API", EC2 developer guide): non-mutating
 * actions 100 tokens refilled at 20/s; the unfiltered-and-unpaginated subset 50 at 10/s;
 * mutating actions 50 at 5/s; and a handful of actions with their own numbers
 * (CreateNetworkInterface, DeleteNetworkInterface, Assign/UnassignPrivateIpAddresses and
 * ModifyNetworkInterfaceAttribute 100 at 5/s; CreateTags 100 at 10/s).
 *
 * EC2's buckets are per account, not per client: 1,000 nodes each within these numbers can
 * ask 1,000 times what the account refills, and every attempt EC2 refuses is one more
 * request the account's other clients (other clusters, tools) compete with, while the
 * fleet's pods get addresses no sooner: the account's refill is the limit. So each bucket
 * paces itself by EC2's answers; a bucket EC2 never throttles never changes pace:
 *
 * - **Descent.** A `RequestLimitExceeded` halves the bucket's rate and drops the tokens on
 *   hand, so the next call (a retry included, aws/retry.ts) waits for the slower refill.
 *   Throttles within one token's time at the new rate are the same signal (a burst refused
 *   at once counts once). A node cannot know how many others share the account; how long
 *   EC2 has kept throttling it stands in for that and sets the pace of the descent: the
 *   wait for a token grows to at most {@linkcode PACE_AGE_FRACTION} (half) of the time
 *   since the throttling began, so the attempts of a node refused without pause grow apart
 *   by half at a time (0, 0.4, 0.8, 1.2, 1.8, 2.7, 4.1, 6.1, 9.1 s …): seven within 5 s, as
 *   short contention deserves, and one every 10 s (the floor) after 30 s of it.
 * - **Floor.** The rate falls as far as a {@linkcode AIMD_FLOOR_DIVISOR}th of the
 *   configured rate: one call per 10 s for the 5/s actions. A node refused for 200 s makes
 *   28 attempts where a floor of a tenth (one per 2 s) made about 100, and 1,000 nodes at
 *   the floor ask 20 times what the account refills instead of 100 times. Deeper floors
 *   were measured (bench/fleet/RESULTS.md): each halving of the floor's rate cuts the
 *   attempts of the nodes that wait but adds about half its wait to the last node's, and
 *   the last nodes set the p99 time-to-IP and the time until every node is warm.
 * - **Increase.** Each call EC2 accepts multiplies a slowed rate by
 *   {@linkcode AIMD_INCREASE} (1.5), up to the configured rate. Multiplying, not adding a
 *   fixed step, keeps a node's rate in proportion to its share at any fleet size: halving on
 *   each refusal and ×1.5 on each acceptance balance where about a third of attempts are
 *   refused (ln 1.5 / (ln 1.5 + ln 2) = 0.37), however many nodes share the account; the
 *   fixed step of a twentieth of the configured rate used before, 50 times a node's share
 *   among 1,000, balanced where nine attempts in ten were refused. Two acceptances in a row
 *   (no throttle between) say EC2 has room: the rate doubles instead, and the next call may
 *   go at once, a probe. A node at the floor is back at its configured rate about 7 s after
 *   EC2 accepts its first call again, not after minutes of calls at its slow pace.
 * - **Recovery by time.** A bucket EC2 has not throttled for its quiet time (the time EC2's
 *   own bucket of the action takes to refill from empty: 20 s for the 5/s actions of 100
 *   tokens, 10 s for other mutating ones, 5 s for Describe) is back at its configured rate
 *   without a call, and a throttle after that begins a new episode. A node whose demand
 *   stopped for that long does not start its next growth at the pace of old contention.
 *
 * The AWS SDKs' "adaptive" retry mode paces a client by a cubic function of the time since
 * its last throttle and never below 0.5 calls/s: a single client's pace, which does not
 * divide an account among 1,000 nodes.
 *
 * @module
 */

/**
 * A throttled bucket's rate never falls below the configured rate divided by this: one call
 * per 10 s for the 5/s actions (see the module doc for why not deeper).
 */
export const AIMD_FLOOR_DIVISOR = 50;

/** Each call EC2 accepts multiplies a slowed bucket's rate by this (up to the configured rate). */
export const AIMD_INCREASE = 1.5;

/**
 * While EC2 keeps throttling a bucket, its wait for a token is at most this fraction of the
 * time since the throttling began: the descent is as slow as the contention is young.
 */
export const PACE_AGE_FRACTION = 0.5;

/** Size and refill rate of one bucket. */
export interface BucketSpec {
  /** Maximum tokens (the burst). */
  capacity: number;
  /** Tokens added per second. */
  refillPerSecond: number;
}

/** EC2's request-rate categories that vpcni's actions fall in. */
export type ActionClass = "nonMutating" | "unfilteredNonMutating" | "mutating";

/** Bucket sizes per category, per-action overrides, and a switch to turn limiting off. */
export interface BucketConfig {
  nonMutating: BucketSpec;
  unfilteredNonMutating: BucketSpec;
  mutating: BucketSpec;
  /** Actions whose bucket differs from their category's (EC2 lists these one by one). */
  actions: Record<string, BucketSpec>;
  /** `false` disables client-side limiting (every acquire succeeds at once). */
  enabled: boolean;
  /** Adapt each bucket's rate to EC2's throttling (AIMD, see the module doc). Default true. */
  adaptive: boolean;
}

/** EC2's published default request-rate buckets (see the module doc for the source). */
export const DEFAULT_BUCKETS: Readonly<BucketConfig> = Object.freeze({
  nonMutating: { capacity: 100, refillPerSecond: 20 },
  unfilteredNonMutating: { capacity: 50, refillPerSecond: 10 },
  mutating: { capacity: 50, refillPerSecond: 5 },
  actions: {
    CreateNetworkInterface: { capacity: 100, refillPerSecond: 5 },
    DeleteNetworkInterface: { capacity: 100, refillPerSecond: 5 },
    AssignPrivateIpAddresses: { capacity: 100, refillPerSecond: 5 },
    UnassignPrivateIpAddresses: { capacity: 100, refillPerSecond: 5 },
    ModifyNetworkInterfaceAttribute: { capacity: 100, refillPerSecond: 5 },
    CreateTags: { capacity: 100, refillPerSecond: 10 },
  },
  enabled: true,
  adaptive: true,
});

/** Actions that EC2 charges to the smaller bucket when called without filter or paging. */
export const UNFILTERED_ACTIONS: ReadonlySet<string> = new Set([
  "DescribeInstances",
  "DescribeNetworkInterfaces",
  "DescribeSecurityGroups",
]);

/** The category of `action`; `filtered` says whether the request had a filter, ids or paging. */
export function actionClass(action: string, filtered: boolean): ActionClass {
  if (/^(Describe|List|Search|Get)/.test(action)) {
    return !filtered && UNFILTERED_ACTIONS.has(action) ? "unfilteredNonMutating" : "nonMutating";
  }
  return "mutating";
}

/** Merges partial overrides over the defaults, checking every number. */
export function resolveBuckets(over: Partial<BucketConfig> = {}): BucketConfig {
  const cfg: BucketConfig = {
    nonMutating: over.nonMutating ?? DEFAULT_BUCKETS.nonMutating,
    unfilteredNonMutating: over.unfilteredNonMutating ?? DEFAULT_BUCKETS.unfilteredNonMutating,
    mutating: over.mutating ?? DEFAULT_BUCKETS.mutating,
    actions: { ...DEFAULT_BUCKETS.actions, ...over.actions },
    enabled: over.enabled ?? true,
    adaptive: over.adaptive ?? true,
  };
  const check = (name: string, s: BucketSpec) => {
    if (!(s.capacity >= 1) || !(s.refillPerSecond > 0) || !Number.isFinite(s.capacity)) {
      throw new RangeError(
        `bucket ${name}: capacity must be >= 1 and refillPerSecond > 0, got ` +
          `${s.capacity} and ${s.refillPerSecond}`,
      );
    }
  };
  check("nonMutating", cfg.nonMutating);
  check("unfilteredNonMutating", cfg.unfilteredNonMutating);
  check("mutating", cfg.mutating);
  for (const [a, s] of Object.entries(cfg.actions)) check(a, s);
  return cfg;
}

/** A token bucket; `acquire` waits (in order of arrival) until a token is there. */
export class TokenBucket {
  readonly spec: BucketSpec;
  #tokens: number;
  #last: number;
  #tail: Promise<void> = Promise.resolve();
  #waiting = 0;
  #now: () => number;
  #rate: number;
  #holdUntil = -Infinity;
  /** When EC2 last throttled this bucket, and when the episode of throttling began. */
  #lastThrottle = -Infinity;
  #episodeStart = -Infinity;
  /** Whether EC2 accepted the last call of this bucket (no throttle since). */
  #lastAccepted = false;

  /** Starts full, as EC2's buckets do. `now` is injectable for tests. */
  constructor(spec: BucketSpec, now: () => number = () => performance.now()) {
    this.spec = spec;
    this.#tokens = spec.capacity;
    this.#now = now;
    this.#last = now();
    this.#rate = spec.refillPerSecond;
  }

  /**
   * The least time (ms) without a throttle that ends an episode of throttling: the time
   * EC2's bucket of this size and rate takes to refill from empty.
   */
  get quietMs(): number {
    return (this.spec.capacity / this.spec.refillPerSecond) * 1000;
  }

  /** Whether no episode of throttling is going on at `t`: no throttle for the quiet time. */
  #episodeOver(t: number): boolean {
    return t - this.#lastThrottle >= this.quietMs;
  }

  #refill(): void {
    const t = this.#now();
    this.#tokens = Math.min(
      this.spec.capacity,
      this.#tokens + ((t - this.#last) / 1000) * this.#rate,
    );
    this.#last = t;
    // Time-based recovery: an episode that is over leaves the bucket at its configured rate.
    if (this.#rate < this.spec.refillPerSecond && this.#episodeOver(t)) {
      this.#rate = this.spec.refillPerSecond;
    }
  }

  /** The refill rate now (tokens/s): the spec's, or less while EC2 throttles. */
  get rate(): number {
    this.#refill();
    return this.#rate;
  }

  /**
   * EC2 throttled a call of this bucket: halve the rate and drop the tokens on hand, so the
   * next call waits for the slower refill. The rate stays at or above the floor and, after
   * the episode's first throttle, at or above one token per {@linkcode PACE_AGE_FRACTION} of
   * the episode's age (see the module doc). Throttles within one token's time at the new
   * rate are the same signal: ignored.
   */
  slowDown(): void {
    const t = this.#now();
    if (t < this.#holdUntil) return;
    this.#refill();
    if (this.#episodeOver(t)) this.#episodeStart = t;
    this.#lastThrottle = t;
    this.#lastAccepted = false;
    const ageSeconds = (t - this.#episodeStart) / 1000;
    const byAge = ageSeconds > 0 ? 1 / (ageSeconds * PACE_AGE_FRACTION) : 0;
    this.#rate = Math.max(
      this.spec.refillPerSecond / AIMD_FLOOR_DIVISOR,
      Math.min(this.#rate, Math.max(this.#rate / 2, byAge)),
    );
    this.#tokens = Math.min(this.#tokens, 0);
    this.#holdUntil = t + 1000 / this.#rate;
  }

  /**
   * EC2 accepted a call of this bucket: multiply a slowed rate by {@linkcode AIMD_INCREASE},
   * up to the spec's. The second acceptance in a row (no throttle between) says EC2 has
   * room: the rate doubles instead and the next call may go at once, a probe.
   */
  speedUp(): void {
    this.#refill();
    const again = this.#lastAccepted;
    this.#lastAccepted = true;
    if (this.#rate >= this.spec.refillPerSecond) return;
    this.#rate = Math.min(this.spec.refillPerSecond, this.#rate * (again ? 2 : AIMD_INCREASE));
    if (again) this.#tokens = Math.max(this.#tokens, 1);
  }

  /** Takes a token now if one is there; returns whether it did. */
  tryTake(): boolean {
    this.#refill();
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  /** Milliseconds until a token will be there (0 when one is there now). */
  waitMs(): number {
    this.#refill();
    return this.#tokens >= 1 ? 0 : ((1 - this.#tokens) / this.#rate) * 1000;
  }

  /** Takes a token, waiting for it; resolves to how long it waited in ms. */
  acquire(): Promise<number> {
    // Fast path: nobody queued and a token is there — no wait at all.
    if (this.#waiting === 0 && this.tryTake()) return Promise.resolve(0);
    this.#waiting++;
    const start = this.#now();
    const turn = this.#tail.then(async () => {
      for (;;) {
        if (this.tryTake()) return;
        await new Promise((r) => setTimeout(r, Math.max(1, Math.ceil(this.waitMs()))));
      }
    });
    this.#tail = turn;
    return turn.then(() => {
      this.#waiting--;
      return this.#now() - start;
    });
  }

  /** Tokens available now (fractional). */
  get tokens(): number {
    this.#refill();
    return this.#tokens;
  }
}

/** One bucket per action, created on first use from a {@linkcode BucketConfig}. */
export class ActionLimiter {
  readonly config: BucketConfig;
  #buckets = new Map<string, TokenBucket>();

  /** Creates a limiter over `over` merged with the defaults. */
  constructor(over: Partial<BucketConfig> = {}) {
    this.config = resolveBuckets(over);
  }

  /** The bucket spec used for `action` in category `cls`. */
  specFor(action: string, cls: ActionClass): BucketSpec {
    return this.config.actions[action] ?? this.config[cls];
  }

  /** Waits for a token of `action`'s bucket; resolves to the wait in ms. */
  acquire(action: string, filtered: boolean): Promise<number> {
    if (!this.config.enabled) return Promise.resolve(0);
    return this.bucketFor(action, filtered).acquire();
  }

  /** Milliseconds until `action`'s bucket has a token (0 when limiting is off). */
  waitMs(action: string, filtered: boolean): number {
    if (!this.config.enabled) return 0;
    return this.bucketFor(action, filtered).waitMs();
  }

  /** Tells `action`'s bucket how EC2 answered a call (see the module doc on adapting). */
  feedback(action: string, filtered: boolean, throttled: boolean): void {
    if (!this.config.enabled || !this.config.adaptive) return;
    const b = this.bucketFor(action, filtered);
    if (throttled) b.slowDown();
    else b.speedUp();
  }

  /** The bucket of `action` (created on first use). */
  bucketFor(action: string, filtered: boolean): TokenBucket {
    const cls = actionClass(action, filtered);
    const key = `${action}/${cls}`;
    let b = this.#buckets.get(key);
    if (!b) {
      b = new TokenBucket(this.specFor(action, cls));
      this.#buckets.set(key, b);
    }
    return b;
  }
}
