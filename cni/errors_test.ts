import assert from "node:assert/strict";
import { CniError, errorJson, toCniError } from "./errors.ts";

const STACK_LINE = /^\s+at\s/m;

Deno.test("an unexpected exception is code 999 with what to do, never its stack", () => {
  const e = toCniError(new TypeError("Cannot read properties of undefined (reading 'ip')"), "ADD");
  assert.equal(e.code, 999);
  assert.match(e.message, /during ADD: Cannot read properties of undefined/);
  assert.match(e.details ?? "", /logLevel": "debug"/);
  const json = JSON.stringify(errorJson(e, "1.1.0"));
  assert.doesNotMatch(json, /\.ts:\d+/);
  assert.equal(toCniError("a string").code, 999);
});

Deno.test("the error writer drops stack frames from msg and details, whatever made them", () => {
  const err = new Error("RTM_NEWLINK eth0: File exists");
  const e = new CniError(
    100,
    "veth datapath: attach failed: RTM_NEWLINK eth0: File exists",
    err.stack,
  );
  assert.match(e.details ?? "", STACK_LINE, "the test needs a real stack to start with");
  const out = errorJson(e, "1.0.0");
  assert.doesNotMatch(out.msg, STACK_LINE);
  assert.doesNotMatch(out.details ?? "", STACK_LINE);
  assert.match(out.details ?? "", /File exists/);
  const onlyStack = errorJson(
    new CniError(7, "m\n    at x (file:///a.ts:1:1)", "    at y"),
    "1.1.0",
  );
  assert.deepEqual(onlyStack, { cniVersion: "1.1.0", code: 7, msg: "m" });
});

Deno.test("msg and details are bounded", () => {
  const out = errorJson(new CniError(7, "m".repeat(10_000), "d".repeat(100_000)), "1.1.0");
  assert.ok(out.msg.length <= 1025);
  assert.ok((out.details ?? "").length <= 4097);
});
