/**
 * The node core (ipam/node_core.ts): several nodes' daemon logic in one process against one
 * simulated account, each on its own instance through its own IMDS endpoint and real SDK
 * client, with no socket, no introspection server and no kernel.
 */
import assert from "node:assert/strict";
import { startSim } from "../../aws/sim/mod.ts";
import { createAwsCloud } from "../../ipam/aws_cloud.ts";
import { type NodeCore, startNodeCore } from "../../ipam/node_core.ts";
import {
  addReq,
  delReq,
  FAST_RETRY,
  inCidr,
  INSTANCE,
  standardScenario,
  SUBNETS,
  tempRoot,
  testConfig,
} from "./harness.ts";

const SECOND = "i-0bbbbbbbbbbbbbbb2";

Deno.test("two node cores in one process serve pods from their own instances' ENIs", async () => {
  const scenario = standardScenario();
  scenario.instances!.push({
    id: SECOND,
    type: "m5.xlarge",
    subnet: SUBNETS.node,
    securityGroups: ["sg-0a000001"],
    az: "us-east-1a",
  });
  const sim = await startSim({ scenario });
  const roots: string[] = [];
  const cores: NodeCore[] = [];
  try {
    for (const id of [INSTANCE, SECOND]) {
      const root = await tempRoot();
      roots.push(root);
      const cloud = await createAwsCloud({
        ec2Endpoint: sim.ec2Endpoint,
        imdsEndpoint: sim.imdsEndpointFor(id),
        ec2: FAST_RETRY as never,
      });
      cores.push(await startNodeCore(testConfig(root), cloud, { startJitterMs: 50 }));
    }
    const got = await Promise.all(
      cores.map((c, i) => Promise.all([0, 1, 2].map((p) => c.request(addReq(`n${i}-p${p}`))))),
    );
    for (const [i, answers] of got.entries()) {
      const id = i === 0 ? INSTANCE : SECOND;
      const ownIps = new Set(
        [...sim.state.enis.values()].filter((e) => e.attachment?.instanceId === id)
          .flatMap((e) => e.privateIps.map((p) => p.address)),
      );
      for (const a of answers) {
        assert.ok(a.ok && "allocation" in a, JSON.stringify(a));
        assert.ok(inCidr(a.allocation.ip, "10.0.0.0/20"));
        assert.ok(ownIps.has(a.allocation.ip), `${a.allocation.ip} is on ${id}`);
      }
    }
    const del = await cores[0].request(delReq("n0-p0"));
    assert.ok(del.ok);
    for (const root of roots) {
      const names = [...Deno.readDirSync(root)].map((e) => e.name);
      assert.ok(!names.includes("ipam.sock"), "a node core opens no unix socket");
      assert.ok(names.includes("state"), "it keeps its checkpoint like a daemon");
    }
    assert.equal(cores[0].daemon.introspectionAddr.port, 0, "and serves no introspection");
  } finally {
    for (const c of cores) await c.stop();
    await sim.close();
    for (const r of roots) await Deno.remove(r, { recursive: true }).catch(() => {});
  }
});
