import assert from "node:assert/strict";
import { fullJitterDelay, isRetryable, resolveRetry, retryDelay } from "./retry.ts";
import { Ec2Client, Ec2Error } from "./ec2.ts";
import { startSim } from "./sim/mod.ts";
import { REGION, SUITE_SCENARIO, SUITE_WORLD } from "../tests/aws/sim_world.ts";

Deno.test("fullJitterDelay: uniform in [0, min(cap, base·2^n))", () => {
  const p = { baseDelayMs: 100, maxDelayMs: 1000 };
  assert.equal(fullJitterDelay(0, p, () => 0), 0);
  assert.equal(fullJitterDelay(0, p, () => 0.999), 99);
  assert.equal(fullJitterDelay(3, p, () => 0.5), 400);
  assert.equal(fullJitterDelay(10, p, () => 0.999), 999, "capped");
  for (let n = 0; n < 20; n++) {
    const d = fullJitterDelay(n, p);
    assert.ok(d >= 0 && d < Math.min(1000, 100 * 2 ** n), `${n}: ${d}`);
  }
});

Deno.test("isRetryable: throttling, 5xx and network failures; client errors are final", () => {
  for (const c of ["RequestLimitExceeded", "Throttling", "InternalError", "Unavailable"]) {
    assert.ok(isRetryable(c), c);
  }
  assert.ok(isRetryable("EndpointUnreachable"));
  assert.ok(isRetryable("Whatever", 503));
  assert.equal(isRetryable("InvalidSubnetID.NotFound", 400), false);
  assert.equal(isRetryable("AttachmentLimitExceeded", 400), false);
  assert.equal(isRetryable("UnauthorizedOperation", 403), false);
});

Deno.test("resolveRetry: defaults and named errors for bad numbers", () => {
  assert.equal(resolveRetry().maxAttempts, 6);
  assert.equal(resolveRetry({ maxAttempts: 1 }).maxAttempts, 1);
  assert.throws(() => resolveRetry({ maxAttempts: 0 }), /maxAttempts/);
  assert.throws(() => resolveRetry({ baseDelayMs: -1 }), /baseDelayMs/);
  assert.throws(() => resolveRetry({ deadlineMs: Infinity }), /deadlineMs/);
});

Deno.test("retryDelay: a throttled retry waits for the slowed bucket on top of the jitter", () => {
  const p = { baseDelayMs: 200, maxDelayMs: 10_000 };
  const half = () => 0.5;
  // A 5xx is one server's hiccup: the jitter alone, whatever the bucket says.
  assert.equal(retryDelay("InternalError", 1, p, 4_000, half), 200);
  assert.equal(retryDelay("Unavailable", 1, p, 0, half), 200);
  // Throttling: the bucket's wait for a token comes first, the jitter on top.
  assert.equal(retryDelay("RequestLimitExceeded", 1, p, 4_000, half), 4_200);
  assert.equal(retryDelay("Throttling", 0, p, 400, half), 500);
  // A bucket slower than the longest backoff ends the call: its caller asks again later.
  assert.equal(retryDelay("RequestLimitExceeded", 1, p, 10_000, half), 10_200);
  assert.equal(retryDelay("RequestLimitExceeded", 1, p, 10_001, half), undefined);
  assert.equal(retryDelay("InternalError", 1, p, 10_001, half), 200);
});

Deno.test("a call EC2 keeps throttling is paced by its bucket and ends once that is slower than the longest backoff", async () => {
  const sim = await startSim({ scenario: SUITE_SCENARIO });
  // EC2 refuses every DescribeVpcs: a bucket of the simulator's that never holds a token.
  sim.faults.throttle = true;
  sim.faults.actionBuckets = { DescribeVpcs: { capacity: 0, refillPerSecond: 0 } };
  const c = new Ec2Client({
    region: REGION,
    endpoint: sim.ec2Endpoint,
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
    maxAttempts: 50,
    retry: { baseDelayMs: 20, maxDelayMs: 1_000, deadlineMs: 20_000 },
  });
  try {
    let attempts = 0;
    await assert.rejects(c.describeVpcs(), (e: unknown) => {
      assert.ok(e instanceof Ec2Error && e.code === "RequestLimitExceeded", String(e));
      attempts = e.attempts;
      return true;
    });
    assert.equal(sim.stats.errors.get("DescribeVpcs:RequestLimitExceeded"), attempts);
    // Retries every 100 ms, then further apart, until the wait for a token passes 1 s: about
    // ten. Jitter alone (or a floor of a tenth of 20/s) would have sent 40 and more in 20 s.
    assert.ok(attempts >= 5 && attempts <= 15, `${attempts} attempts`);
    // Another action's bucket is not slowed.
    const before = c.metrics.throttleWaitMs;
    await c.describeSubnets({ ids: [SUITE_WORLD.subnetId] });
    assert.equal(c.metrics.throttleWaitMs, before);
  } finally {
    c.close();
    await sim.close();
  }
});
