/**
 * What a pool's growth costs in EC2 calls, the account-wide budget every node shares: a new
 * ENI is one create (with its addresses), one attach and one attribute change. The attach is
 * waited for on IMDS, which is not counted against the EC2 API budget.
 */
import assert from "node:assert/strict";
import {
  addReq,
  delReq,
  eventually,
  simNodeEnis,
  standardScenario,
  startStack,
} from "./harness.ts";
import type { PoolView } from "../../proto/introspect.ts";

Deno.test("ec2 calls: start-up costs 1, a new ENI 3 (create + attach + modify), a release 2; no polling", async () => {
  const stack = await startStack(standardScenario(), {
    pools: [{ name: "default", warmEnis: 1, ipCooldownSeconds: 0 }],
    imdsCheckSeconds: 3600,
    ec2ResyncSeconds: 3600,
    leakedEniGraceSeconds: 3600, // no early look for leaks either
  });
  try {
    const pool = async () => (await stack.introspect<PoolView[]>("/v1/pools"))[0];
    // m5.xlarge: 15 addresses per ENI. The primary ENI's 14 are the first warm ENI's worth.
    assert.ok(await eventually(async () => (await pool()).free >= 14, 15_000));
    // Start-up on a cold node: one assign that fills the primary ENI. The instance type's
    // limits come from the embedded table, the node's ENIs and subnet from IMDS.
    assert.deepEqual(Object.fromEntries(stack.sim.stats.ec2), {
      AssignPrivateIpAddresses: 1,
    });
    const before = new Map(stack.sim.stats.ec2);
    const delta = (action: string) =>
      (stack.sim.stats.ec2.get(action) ?? 0) - (before.get(action) ?? 0);

    // 14 pods take every warm address: the pool adds one ENI to be one ENI's worth ahead.
    for (let i = 0; i < 14; i++) assert.ok((await stack.call(addReq(`b${i}`))).ok);
    assert.ok(await eventually(async () => (await pool()).free >= 14, 15_000));
    assert.equal((await pool()).enis, 2);

    assert.deepEqual(
      Object.fromEntries([...stack.sim.stats.ec2.keys()].map((a) => [a, delta(a)])),
      Object.fromEntries([...stack.sim.stats.ec2.keys()].map((a) => [
        a,
        ({
          CreateNetworkInterface: 1,
          AttachNetworkInterface: 1,
          ModifyNetworkInterfaceAttribute: 1,
        } as Record<string, number>)[a] ?? 0,
      ])),
    );

    // The pods go: after the hysteresis the idle ENI is released with one detach and one
    // delete; the detach is watched on IMDS, not polled on EC2.
    const beforeRelease = new Map(stack.sim.stats.ec2);
    for (let i = 0; i < 14; i++) assert.ok((await stack.call(delReq(`b${i}`))).ok);
    assert.ok(await eventually(async () => (await pool()).enis === 1, 15_000));
    assert.ok(await eventually(() => simNodeEnis(stack.sim).length === 1, 5_000));
    // The delete follows once IMDS shows the detach done: wait for it, then count.
    const deletes = () => stack.sim.stats.ec2.get("DeleteNetworkInterface") ?? 0;
    const deletesBefore = beforeRelease.get("DeleteNetworkInterface") ?? 0;
    assert.ok(
      await eventually(() => deletes() > deletesBefore, 15_000),
      "the ENI was never deleted",
    );
    const released = Object.fromEntries(
      [...stack.sim.stats.ec2].map(([a, n]) => [a, n - (beforeRelease.get(a) ?? 0)]).filter((
        [, n],
      ) => (n as number) > 0),
    );
    assert.deepEqual(released, { DetachNetworkInterface: 1, DeleteNetworkInterface: 1 });

    // A pod that picks its pool by subnet tags needs them: the subnets are described once.
    const tagged = await stack.call(addReq("by-tag", { "vpcni.io/subnet-selector": "zone=node" }));
    assert.ok(tagged.ok, JSON.stringify(tagged));
    assert.equal(stack.sim.stats.ec2.get("DescribeSubnets"), 1);
    assert.ok(
      (await stack.call(addReq("by-tag-2", { "vpcni.io/subnet-selector": "zone=node" }))).ok,
    );
    assert.equal(stack.sim.stats.ec2.get("DescribeSubnets"), 1);
  } finally {
    await stack.close();
  }
});
