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
 * EC2's buckets are per account, not per client: many nodes each within these numbers can
 * still empty the account's. So each bucket adapts its refill rate to EC2's answers
 * (additive increase, multiplicative decrease): a `RequestLimitExceeded` halves it (once
 * per token at the new rate, so a burst of throttled calls counts as one signal) down to a
 * tenth of the configured rate, and each call EC2 accepts adds back a twentieth of the
 * configured rate, up to it. A client that is never throttled never changes pace. The floor
 * keeps a node that was throttled for minutes able to ask again within seconds once EC2
 * answers (the AWS SDKs' adaptive retry mode keeps a floor of its own, 0.5 calls/s); pacing
 * a fleet below that is the job of batching, prefixes and start-up jitter.
 *
 * @module
 */

/** A throttled bucket's rate never falls below the configured rate divided by this. */
export const AIMD_FLOOR_DIVISOR = 10;

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

  /** Starts full, as EC2's buckets do. `now` is injectable for tests. */
  constructor(spec: BucketSpec, now: () => number = () => performance.now()) {
    this.spec = spec;
    this.#tokens = spec.capacity;
    this.#now = now;
    this.#last = now();
    this.#rate = spec.refillPerSecond;
  }

  #refill(): void {
    const t = this.#now();
    this.#tokens = Math.min(
      this.spec.capacity,
      this.#tokens + ((t - this.#last) / 1000) * this.#rate,
    );
    this.#last = t;
  }

  /** The refill rate now (tokens/s): the spec's, or less while EC2 throttles. */
  get rate(): number {
    return this.#rate;
  }

  /**
   * EC2 throttled a call of this bucket: halve the rate (not below a tenth of the
   * spec's) and drop the tokens on hand, so the next call waits for the slower refill.
   * Throttles within one token's time at the new rate are the same signal: ignored.
   */
  slowDown(): void {
    const t = this.#now();
    if (t < this.#holdUntil) return;
    this.#refill();
    this.#rate = Math.max(this.spec.refillPerSecond / AIMD_FLOOR_DIVISOR, this.#rate / 2);
    this.#tokens = Math.min(this.#tokens, 0);
    this.#holdUntil = t + 1000 / this.#rate;
  }

  /** EC2 accepted a call of this bucket: add back a twentieth of the spec's rate, up to it. */
  speedUp(): void {
    if (this.#rate >= this.spec.refillPerSecond) return;
    this.#refill();
    this.#rate = Math.min(
      this.spec.refillPerSecond,
      this.#rate + this.spec.refillPerSecond / 20,
    );
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
