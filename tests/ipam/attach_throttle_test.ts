/**
 * An ENI whose attach EC2 throttled is attached by the pool's next growth, not deleted and
 * created again: under the account's limits each of those calls costs a token of the
 * bucket every node shares. Against the simulator with AttachNetworkInterface throttled.
 */
import assert from "node:assert/strict";
import { startSim } from "../../aws/sim/mod.ts";
import { createAwsCloud } from "../../ipam/aws_cloud.ts";
import { startNodeCore } from "../../ipam/node_core.ts";
import { addReq, eventually, INSTANCE, standardScenario, tempRoot, testConfig } from "./harness.ts";

Deno.test("attach throttled: the created ENI is attached by the next growth, not re-created", async () => {
  const sim = await startSim({ scenario: standardScenario() });
  const root = await tempRoot();
  const cloud = await createAwsCloud({
    ec2Endpoint: sim.ec2Endpoint,
    imdsEndpoint: sim.imdsEndpointFor(INSTANCE),
    // The client gives up on a throttled call after half a second (a busy account's 30 s).
    ec2: { retry: { baseDelayMs: 20, maxDelayMs: 100, deadlineMs: 500 } } as never,
  });
  const core = await startNodeCore(
    testConfig(root, {
      pools: [{ name: "default", warmEnis: 0, warmIps: 5, ipCooldownSeconds: 0 }],
      ec2ResyncSeconds: 3600,
      leakedEniGraceSeconds: 3600,
      imdsCheckSeconds: 3600,
    }),
    cloud,
  );
  try {
    // Every attach is refused as over the account's limit until the fault is lifted.
    sim.faults.throttle = true;
    sim.faults.actionBuckets = { AttachNetworkInterface: { capacity: 0, refillPerSecond: 0 } };
    // The primary ENI holds 14 addresses; the 15th pod needs a new ENI.
    const pods = [...Array(15)].map((_, i) => core.request(addReq(`p${i}`)));
    const count = (a: string) => sim.stats.ec2.get(a) ?? 0;
    assert.ok(await eventually(() => count("AttachNetworkInterface") >= 3, 10_000));
    sim.faults.throttle = false;
    sim.faults.actionBuckets = {};
    for (const r of await Promise.all(pods)) assert.ok(r.ok, JSON.stringify(r));
    assert.ok(await eventually(() => core.daemon.pools.growth.ctx.state.enis.size === 2, 10_000));
    const created = count("CreateNetworkInterface");
    assert.equal(count("DeleteNetworkInterface"), 0, "no ENI deleted");
    assert.equal(created, 1, `one ENI created, not ${created}`);
    const ours = sim.state.enisOf(INSTANCE);
    assert.equal(ours.length, 2, "the created ENI is the one attached");
  } finally {
    await core.stop();
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});
