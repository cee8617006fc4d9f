import assert from "node:assert/strict";
import {
  actionClass,
  ActionLimiter,
  DEFAULT_BUCKETS,
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

Deno.test("AIMD: a throttle halves the rate once per signal, successes add a twentieth back", () => {
  let t = 0;
  const b = new TokenBucket({ capacity: 10, refillPerSecond: 4 }, () => t);
  b.slowDown();
  assert.equal(b.rate, 2);
  assert.equal(b.tokens, 0, "the tokens on hand are dropped");
  b.slowDown(); // the same burst of throttles: within one token's time at the new rate
  assert.equal(b.rate, 2);
  t = 500; // one token at 2/s
  b.slowDown();
  assert.equal(b.rate, 1);
  assert.equal(b.waitMs(), 1000, "the next token comes at the slower rate");
  for (let i = 0; i < 19; i++) b.speedUp();
  assert.equal(b.rate, 4, "additive increase stops at the configured rate");
  for (let i = 0; i < 40; i++) {
    t += 1_000_000;
    b.slowDown();
  }
  assert.equal(b.rate, 4 / 10, "never below a tenth of the configured rate");
});

Deno.test("AIMD is per action, and off when asked", () => {
  const l = new ActionLimiter();
  l.feedback("CreateNetworkInterface", true, true);
  assert.equal(l.bucketFor("CreateNetworkInterface", true).rate, 2.5);
  assert.equal(l.bucketFor("AttachNetworkInterface", true).rate, 5);
  l.feedback("CreateNetworkInterface", true, false);
  assert.equal(l.bucketFor("CreateNetworkInterface", true).rate, 2.75);
  const fixed = new ActionLimiter({ adaptive: false });
  fixed.feedback("CreateNetworkInterface", true, true);
  assert.equal(fixed.bucketFor("CreateNetworkInterface", true).rate, 5);
});
