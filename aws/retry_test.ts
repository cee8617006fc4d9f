import assert from "node:assert/strict";
import { fullJitterDelay, isRetryable, resolveRetry } from "./retry.ts";

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
