/**
 * The `/_sim/` control endpoints: a sim in another process can be inspected and its faults
 * changed while it runs.
 */
import assert from "node:assert/strict";
import { DescribeVpcsCommand } from "@aws-sdk/client-ec2";
import { startSim } from "../../aws/sim/mod.ts";
import { IDS, rejection, sdkClient, smallScenario } from "./sim_helpers.ts";

Deno.test("GET /_sim/state and /_sim/stats show the world and the counters", async () => {
  const sim = await startSim({ scenario: smallScenario() });
  const ec2 = sdkClient(sim);
  try {
    await ec2.send(new DescribeVpcsCommand({}));
    const state = await (await fetch(`${sim.ec2Endpoint}/_sim/state`)).json();
    assert.equal(state.vpc.id, IDS.vpc);
    const node = state.instances.find((i: { id: string }) => i.id === IDS.node);
    assert.equal(node.type, "m5.large");
    const [eniId] = node.enis;
    const eni = state.networkInterfaces.find((e: { id: string }) => e.id === eniId);
    assert.deepEqual(eni.privateIps, ["10.0.0.10"]);
    assert.equal(eni.attachment.deviceIndex, 0);
    const stats = await (await fetch(`${sim.ec2Endpoint}/_sim/stats`)).json();
    assert.equal(stats.ec2.DescribeVpcs, 1);
    const missing = await fetch(`${sim.ec2Endpoint}/_sim/nope`);
    await missing.body?.cancel();
    assert.equal(missing.status, 404);
  } finally {
    ec2.destroy();
    await sim.close();
  }
});

Deno.test("PATCH /_sim/faults changes faults live; a bad body is refused and changes nothing", async () => {
  const sim = await startSim({ scenario: smallScenario() });
  const ec2 = sdkClient(sim);
  const patch = (body: string) =>
    fetch(`${sim.ec2Endpoint}/_sim/faults`, {
      method: "PATCH",
      headers: { "content-type": "application/json" },
      body,
    });
  try {
    const bad = await patch(JSON.stringify({ errorRate: 2, latencyMs: { DescribeVpcs: 5 } }));
    assert.equal(bad.status, 400);
    const err = await bad.json();
    assert.equal(err.issues[0].field, "errorRate");
    assert.equal(sim.faults.errorRate, 0);
    assert.equal(sim.faults.latencyMs.DescribeVpcs, undefined, "nothing of a bad body applies");
    const notJson = await patch("{");
    await notJson.body?.cancel();
    assert.equal(notJson.status, 400);

    const ok = await patch(JSON.stringify({ throttleProbability: 1, attachDelayMs: 250 }));
    assert.equal(ok.status, 200);
    assert.equal((await ok.json()).attachDelayMs, 250);
    assert.equal(sim.faults.attachDelayMs, 250);
    const thr = await rejection(() => ec2.send(new DescribeVpcsCommand({})));
    assert.equal(thr.name, "RequestLimitExceeded");
  } finally {
    ec2.destroy();
    await sim.close();
  }
});
