/**
 * A bug in the daemon answers code 999 with its message, never 11 ("try again later", which
 * would make the runtime retry for ever); the stack goes to the daemon's log only. The bug is
 * a real one of its kind: an allocation naming an ENI the state lost, which makes building
 * the answer throw.
 */
import assert from "node:assert/strict";
import { failureAnswer } from "../../ipam/api.ts";
import { CheckpointWriteError } from "../../ipam/pools.ts";
import { Ec2Error } from "../../aws/ec2_errors.ts";
import { addReq, standardScenario, startStack } from "./harness.ts";
import { captureLog } from "./log_capture.ts";

Deno.test("daemon bug: code 999 with the message, the stack only in the log", async () => {
  const stack = await startStack(standardScenario(), {
    pools: [{ name: "default", warmIps: 1, warmEnis: 0 }],
    // No re-sync repairs the state while the bug is looked at.
    ec2ResyncSeconds: 3600,
    imdsCheckSeconds: 3600,
  });
  const capture = await captureLog();
  try {
    const added = await stack.call(addReq("bug"));
    assert.ok(added.ok && "allocation" in added, JSON.stringify(added));
    const state = stack.daemon.pools.growth.ctx.state;
    const eni = state.enis.get(added.allocation.eni.id)!;
    state.enis.delete(eni.id);
    const check = { ...addReq("bug"), op: "check" };
    const answer = await stack.call(check);
    state.enis.set(eni.id, eni);
    assert.ok(!answer.ok, JSON.stringify(answer));
    assert.equal(answer.code, 999, JSON.stringify(answer));
    assert.match(answer.msg, /daemon bug during check: allocation .* refers to unknown ENI eni-/);
    assert.doesNotMatch(JSON.stringify(answer), /\bat .*\.ts:\d+/, "no stack frame in the answer");
    const logged = capture.records().find((r) => r.level === "ERROR");
    assert.ok(logged, "the bug is logged");
    const props = logged.properties as Record<string, string>;
    assert.equal(props.op, "check");
    assert.match(props.stack, /unknown ENI[\s\S]*\n\s+at .*pools\.ts:\d+/, "the stack is logged");
    // The state is whole again: the same CHECK answers normally.
    const again = await stack.call(check);
    assert.ok(again.ok && "allocation" in again && again.allocation.ip === added.allocation.ip);
  } finally {
    await capture.stop();
    await stack.close();
  }
});

Deno.test("daemon failures: EC2 is 11 (transient), an unwritable checkpoint 5, a bug 999", async () => {
  const capture = await captureLog();
  try {
    const throttled = new Ec2Error({
      action: "DescribeSubnets",
      code: "RequestLimitExceeded",
      message: "Request limit exceeded.",
    });
    assert.equal(failureAnswer("add", throttled).code, 11);
    const disk = new CheckpointWriteError(
      "DEL released 10.0.0.9",
      "/var/lib/vpcni",
      new Deno.errors.PermissionDenied("Read-only file system (os error 30)"),
    );
    const io = failureAnswer("del", disk);
    assert.equal(io.code, 5);
    assert.match(
      io.msg,
      /DEL released 10\.0\.0\.9, but writing the checkpoint in \/var\/lib\/vpcni failed: Read-only/,
    );
    assert.equal(failureAnswer("gc", new TypeError("x is undefined")).code, 999);
  } finally {
    await capture.stop();
  }
});
