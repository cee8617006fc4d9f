import assert from "node:assert/strict";
import {
  actionClass,
  ActionLimiter,
  AIMD_FLOOR_DIVISOR,
  AIMD_INCREASE,
  DEFAULT_BUCKETS,
  PACE_AGE_FRACTION,
  resolveBuckets,
  TokenBucket,
} from "./throttle.ts";

Deno.test("actionClass: Describe calls without filter or paging use the smaller bucket", () => {
  assert.equal(actionClass("DescribeNetworkInterfaces", false), "unfilteredNonMutating");
  assert.equal(actionClass("DescribeNetworkInterfaces", true), "nonMutating");
  assert.equal(actionClass("DescribeSubnets", false), "nonMutating");
  assert.equal(actionClass("AttachNetworkInterface", true), "mutating");
  assert.equal(actionClass("CreateTags", true), "mutating");
});

Deno.test("defaults are EC2's published request-rate buckets", () => {
  assert.deepEqual(DEFAULT_BUCKETS.nonMutating, { capacity: 100, refillPerSecond: 20 });
  assert.deepEqual(DEFAULT_BUCKETS.unfilteredNonMutating, { capacity: 50, refillPerSecond: 10 });
  assert.deepEqual(DEFAULT_BUCKETS.mutating, { capacity: 50, refillPerSecond: 5 });
  assert.deepEqual(DEFAULT_BUCKETS.actions.CreateNetworkInterface, {
    capacity: 100,
    refillPerSecond: 5,
  });
  assert.deepEqual(DEFAULT_BUCKETS.actions.CreateTags, { capacity: 100, refillPerSecond: 10 });
  const l = new ActionLimiter();
  assert.deepEqual(l.specFor("AttachNetworkInterface", "mutating"), DEFAULT_BUCKETS.mutating);
  assert.deepEqual(
    l.specFor("AssignPrivateIpAddresses", "mutating"),
    DEFAULT_BUCKETS.actions.AssignPrivateIpAddresses,
  );
});

Deno.test("resolveBuckets: overrides merge over defaults and bad numbers are named", () => {
  const c = resolveBuckets({
    mutating: { capacity: 10, refillPerSecond: 1 },
    actions: { CreateTags: { capacity: 3, refillPerSecond: 1 } },
  });
  assert.deepEqual(c.mutating, { capacity: 10, refillPerSecond: 1 });
  assert.deepEqual(c.nonMutating, DEFAULT_BUCKETS.nonMutating);
  assert.deepEqual(c.actions.CreateTags, { capacity: 3, refillPerSecond: 1 });
  assert.deepEqual(
    c.actions.DeleteNetworkInterface,
    DEFAULT_BUCKETS.actions.DeleteNetworkInterface,
  );
  assert.throws(
    () => resolveBuckets({ nonMutating: { capacity: 0, refillPerSecond: 1 } }),
    /bucket nonMutating: capacity must be >= 1/,
  );
  assert.throws(
    () => resolveBuckets({ actions: { CreateTags: { capacity: 5, refillPerSecond: 0 } } }),
    /bucket CreateTags/,
  );
});

Deno.test("TokenBucket: starts full, empties, refills at its rate and never beyond capacity", () => {
  let now = 0;
  const b = new TokenBucket({ capacity: 3, refillPerSecond: 2 }, () => now);
  assert.ok(b.tryTake() && b.tryTake() && b.tryTake());
  assert.equal(b.tryTake(), false);
  assert.equal(b.waitMs(), 500);
  now = 499;
  assert.equal(b.tryTake(), false);
  now = 500;
  assert.equal(b.tryTake(), true);
  now = 60_000;
  assert.equal(Math.round(b.tokens), 3);
});

Deno.test("TokenBucket.acquire: waiters are served in order, each after a refill", async () => {
  const b = new TokenBucket({ capacity: 1, refillPerSecond: 100 });
  const order: number[] = [];
  const waits = await Promise.all(
    [0, 1, 2, 3].map((i) => b.acquire().then((w) => (order.push(i), w))),
  );
  assert.deepEqual(order, [0, 1, 2, 3]);
  assert.equal(waits[0], 0, "the first token was there");
  assert.ok(waits[3] >= 20, `the fourth waited for three refills (${waits[3]} ms)`);
});

Deno.test("ActionLimiter: each action has its own bucket; disabled means no waiting", async () => {
  const l = new ActionLimiter({ mutating: { capacity: 1, refillPerSecond: 50 } });
  assert.equal(await l.acquire("AttachNetworkInterface", true), 0);
  assert.ok(
    (await l.acquire("DetachNetworkInterface", true)) < 5,
    "another action, another bucket",
  );
  const off = new ActionLimiter({ enabled: false, mutating: { capacity: 1, refillPerSecond: 1 } });
  for (let i = 0; i < 5; i++) assert.equal(await off.acquire("AttachNetworkInterface", true), 0);
});

/** A bucket of EC2's 5/s actions (100 tokens) on a clock the test moves. */
function clockedBucket() {
  const clock = { t: 0 };
  const b = new TokenBucket({ capacity: 100, refillPerSecond: 5 }, () => clock.t);
  return { clock, b };
}

/**
 * A caller that sends its next attempt as soon as the bucket has a token, against an EC2 that
 * refuses every attempt for `seconds`; returns the attempt times (ms).
 */
function refusedFor(b: TokenBucket, clock: { t: number }, seconds: number): number[] {
  const sent: number[] = [];
  const end = clock.t + seconds * 1000;
  for (;;) {
    const next = clock.t + Math.ceil(b.waitMs());
    if (next >= end) break;
    clock.t = next;
    assert.ok(b.tryTake());
    sent.push(clock.t);
    b.slowDown();
  }
  return sent;
}

Deno.test("pacing: a bucket EC2 never throttles never changes pace", () => {
  const { clock, b } = clockedBucket();
  const plain = new TokenBucket({ capacity: 100, refillPerSecond: 5 }, () => clock.t);
  for (let i = 0; i < 1000; i++) {
    clock.t += 37;
    b.speedUp();
    assert.equal(b.tryTake(), plain.tryTake());
    assert.equal(b.rate, 5);
    assert.equal(b.waitMs(), plain.waitMs());
  }
  clock.t += 3_600_000;
  b.speedUp();
  assert.equal(b.rate, 5);
  assert.equal(b.tokens, 100);
});

Deno.test("pacing: a throttle halves the rate once per signal and drops the tokens on hand", () => {
  const { clock, b } = clockedBucket();
  b.slowDown();
  assert.equal(b.rate, 2.5);
  assert.equal(b.tokens, 0, "the tokens on hand are dropped");
  assert.equal(b.waitMs(), 400, "the next call waits for the slower refill");
  b.slowDown(); // the same burst of refusals: within one token's time at the new rate
  assert.equal(b.rate, 2.5);
  clock.t = 399;
  b.slowDown();
  assert.equal(b.rate, 2.5, "still the same signal");
});

Deno.test("pacing: under refusals the wait grows with the episode, never past half its age", () => {
  const { clock, b } = clockedBucket();
  const sent = refusedFor(b, clock, 30);
  for (let i = 2; i < sent.length; i++) {
    const gap = sent[i] - sent[i - 1];
    const age = sent[i - 1] - sent[0];
    // One token at the previous rate at most past the bound: the wait was set at that throttle.
    assert.ok(
      gap <= Math.max(400, age * PACE_AGE_FRACTION) + 1,
      `attempt ${i}: ${gap} ms after ${age} ms`,
    );
  }
  // Young contention is retried soon: a daemon retrying a release that EC2 refuses sees
  // seven refusals within 5 s, and its wait after them is a couple of seconds.
  const young = clockedBucket();
  const first = refusedFor(young.b, young.clock, 5);
  assert.ok(first.length >= 7, `${first.length} attempts in 5 s`);
  assert.ok(young.b.waitMs() <= 2_500, `then waits ${young.b.waitMs()} ms`);
});

Deno.test("pacing: minutes of refusals take the bucket to its floor and no further", () => {
  const { clock, b } = clockedBucket();
  const sent = refusedFor(b, clock, 200);
  assert.equal(b.rate, 5 / AIMD_FLOOR_DIVISOR);
  const floorWait = (AIMD_FLOOR_DIVISOR / 5) * 1000;
  assert.equal(sent.at(-1)! - sent.at(-2)!, floorWait);
  // A floor of a tenth of the rate (the pacing before) retried every 2 s: about 100 attempts.
  assert.ok(sent.length <= 40, `${sent.length} attempts in 200 s`);
  const more = refusedFor(b, clock, 600);
  assert.equal(b.rate, 5 / AIMD_FLOOR_DIVISOR, "never below the floor");
  assert.ok(more.length >= 600_000 / floorWait - 1, `${more.length} in 600 s more`);
  assert.equal(more.at(-1)! - more.at(-2)!, floorWait);
});

Deno.test("pacing: acceptances multiply a slowed rate, two in a row double it and probe", () => {
  const { clock, b } = clockedBucket();
  b.slowDown();
  clock.t = 400;
  b.slowDown();
  clock.t = 1200;
  b.slowDown();
  const slowed = b.rate;
  assert.ok(slowed < 2.5, `${slowed}`);
  clock.t += b.waitMs();
  assert.ok(b.tryTake());
  b.speedUp();
  assert.equal(b.rate, slowed * AIMD_INCREASE);
  assert.ok(b.tokens < 1, "the next call waits for its token");
  b.speedUp(); // accepted again, nothing refused between
  assert.equal(b.rate, slowed * AIMD_INCREASE * 2);
  assert.ok(b.tryTake(), "the next call may go at once");
});

Deno.test("pacing: an episode over is time enough to be back at the configured rate", () => {
  const { clock, b } = clockedBucket();
  b.slowDown();
  clock.t = 400;
  b.slowDown();
  assert.equal(b.quietMs, 20_000, "EC2's bucket of 100 at 5/s refills in 20 s");
  assert.equal(new TokenBucket({ capacity: 100, refillPerSecond: 20 }).quietMs, 5_000);
  clock.t = 400 + b.quietMs - 1;
  assert.ok(b.rate < 5, "quiet, but not for long enough");
  clock.t = 400 + b.quietMs;
  assert.equal(b.rate, 5, "no call at all, and back at the configured rate");
  // Minutes of refusals too: the quiet time after the last one, and the bucket is back.
  const sent = refusedFor(b, clock, 100);
  assert.equal(b.rate, 5 / AIMD_FLOOR_DIVISOR);
  clock.t = sent.at(-1)! + b.quietMs - 1;
  assert.equal(b.rate, 5 / AIMD_FLOOR_DIVISOR);
  clock.t = sent.at(-1)! + b.quietMs;
  assert.equal(b.rate, 5);
  // A throttle then begins a new episode: halved once, and young again (retried soon).
  b.slowDown();
  assert.equal(b.rate, 2.5);
  assert.equal(b.waitMs(), 400);
});

Deno.test("pacing: a node slowed to the floor is back at full rate within seconds of EC2 accepting", () => {
  const { clock, b } = clockedBucket();
  refusedFor(b, clock, 300);
  assert.equal(b.rate, 5 / AIMD_FLOOR_DIVISOR);
  // EC2 accepts again. The next call goes when its token is there (at most the floor's wait);
  // from then on, each accepted call after a quiet time lets the next go at once.
  clock.t += Math.ceil(b.waitMs());
  assert.ok(b.tryTake());
  b.speedUp();
  const accepted = clock.t;
  let calls = 1;
  while (b.rate < 5) {
    clock.t += Math.ceil(b.waitMs());
    assert.ok(b.tryTake());
    calls++;
    b.speedUp();
  }
  // The floor's wait divided by 1.5 once, then every call at once.
  assert.ok(clock.t - accepted <= 7_000, `${clock.t - accepted} ms`);
  assert.ok(calls <= 8, `${calls} calls`);
  // And a throttle then starts from the configured rate again.
  b.slowDown();
  assert.equal(b.rate, 2.5);
});

Deno.test("pacing: refusals mixed with acceptances (EC2 busy, not full) keep the rate up", () => {
  const { clock, b } = clockedBucket();
  // Three in ten attempts refused, at random; the rest accepted.
  let seed = 7;
  const random = () => ((seed = (seed * 48271) % 2147483647) / 2147483647);
  for (let i = 0; i < 2000; i++) {
    clock.t += Math.ceil(b.waitMs());
    assert.ok(b.tryTake());
    if (random() < 0.3) b.slowDown();
    else b.speedUp();
  }
  assert.ok(b.rate > 1, `rate ${b.rate}`);
});

Deno.test("pacing is per action, and off when asked", () => {
  const l = new ActionLimiter();
  l.feedback("CreateNetworkInterface", true, true);
  assert.equal(l.bucketFor("CreateNetworkInterface", true).rate, 2.5);
  assert.equal(l.bucketFor("AttachNetworkInterface", true).rate, 5);
  assert.ok(l.waitMs("CreateNetworkInterface", true) > 0, "the throttled bucket waits");
  assert.equal(l.waitMs("AttachNetworkInterface", true), 0);
  l.feedback("CreateNetworkInterface", true, false);
  assert.equal(l.bucketFor("CreateNetworkInterface", true).rate, 2.5 * AIMD_INCREASE);
  const fixed = new ActionLimiter({ adaptive: false });
  fixed.feedback("CreateNetworkInterface", true, true);
  assert.equal(fixed.bucketFor("CreateNetworkInterface", true).rate, 5);
  const off = new ActionLimiter({ enabled: false });
  off.feedback("CreateNetworkInterface", true, true);
  assert.equal(off.waitMs("CreateNetworkInterface", true), 0);
});
