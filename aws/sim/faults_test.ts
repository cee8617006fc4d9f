import assert from "node:assert/strict";
import { defaultFaults, FaultInjector } from "./faults.ts";

Deno.test("a token bucket empties, then refills at its rate up to its capacity", () => {
  const f = defaultFaults();
  f.throttle = true;
  f.actionBuckets.AttachNetworkInterface = { capacity: 2, refillPerSecond: 1 };
  const inj = new FaultInjector(f);
  const at = (ms: number) => inj.decide("AttachNetworkInterface", "mutating", ms).kind;
  assert.equal(at(0), "pass");
  assert.equal(at(0), "pass");
  assert.equal(at(0), "error");
  assert.equal(at(500), "error", "half a token is not enough");
  assert.equal(at(1000), "pass");
  assert.equal(at(1000), "error");
  assert.equal(at(60_000), "pass");
  assert.equal(at(60_000), "pass");
  assert.equal(at(60_000), "error", "refill stops at capacity");
});

Deno.test("each action has its own bucket, sized by its category", () => {
  const f = defaultFaults();
  f.throttle = true;
  f.buckets.nonMutating = { capacity: 1, refillPerSecond: 0 };
  const inj = new FaultInjector(f);
  assert.equal(inj.decide("DescribeSubnets", "nonMutating", 0).kind, "pass");
  assert.equal(inj.decide("DescribeSubnets", "nonMutating", 0).kind, "error");
  assert.equal(inj.decide("DescribeVpcs", "nonMutating", 0).kind, "pass");
  assert.equal(inj.decide("DescribeVpcs", "unfilteredNonMutating", 0).kind, "pass");
});

Deno.test("AWS's published buckets are the defaults, and nothing is injected by default", () => {
  const f = defaultFaults();
  assert.deepEqual(f.buckets.nonMutating, { capacity: 100, refillPerSecond: 20 });
  assert.deepEqual(f.buckets.mutating, { capacity: 200, refillPerSecond: 5 });
  const inj = new FaultInjector(f, () => 0);
  for (let i = 0; i < 1000; i++) assert.equal(inj.decide("CreateTags", "mutating", 0).kind, "pass");
});

Deno.test("the dice decide throttles and 5xx: throttle first, then error, then 500 vs 503", () => {
  const f = defaultFaults();
  f.throttleProbability = 0.5;
  f.errorRate = 0.5;
  const draws = [0.1, 0.9, 0.1, 0.1, 0.9, 0.1, 0.9, 0.9, 0.9, 0.9];
  const inj = new FaultInjector(f, () => draws.shift()!);
  const d = () => inj.decide("CreateTags", "mutating", 0);
  assert.deepEqual(d(), {
    kind: "error",
    status: 503,
    code: "RequestLimitExceeded",
    message: "Request limit exceeded.",
  });
  assert.equal((d() as { code: string }).code, "InternalError");
  assert.equal((d() as { code: string }).code, "Unavailable");
  assert.equal(d().kind, "pass");
  assert.equal(inj.latencyFor("CreateTags"), 0);
  f.latencyMs = { default: 7, CreateTags: 30 };
  assert.equal(inj.latencyFor("CreateTags"), 30);
  assert.equal(inj.latencyFor("DescribeVpcs"), 7);
});
