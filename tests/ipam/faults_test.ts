/**
 * Faults: with the simulator answering 30% of EC2 requests RequestLimitExceeded and 10%
 * with 5xx, pods still get addresses, no ENI leaks, and the leaked-ENI collector deletes
 * only ENIs tagged for this cluster AND this instance.
 */
import assert from "node:assert/strict";
import { startSim } from "../../aws/sim/mod.ts";
import {
  addReq,
  delReq,
  eventually,
  INSTANCE,
  ipamClient,
  metricValue,
  simDetachedOurs,
  simNodeEnis,
  standardScenario,
  startDaemonOn,
  SUBNETS,
  tempRoot,
} from "./harness.ts";

Deno.test("faults: 30% throttling + 10% 5xx: pods get IPs, no ENI leaks, collector spares others", async () => {
  const scenario = standardScenario();
  scenario.instances!.push({
    id: "i-0bbbbbbbbbbbbbbb2",
    type: "m5.xlarge",
    subnet: SUBNETS.node,
    az: "us-east-1a",
  });
  const sim = await startSim({ scenario });
  const old = new Date(Date.now() - 3_600_000).toISOString();
  const mk = (tags: Record<string, string>) =>
    sim.state.createNetworkInterface({ subnetId: SUBNETS.internalA, tags }).id;
  const untagged = mk({});
  const otherInstance = mk({
    "vpcni.io/cluster": "test-cluster",
    "vpcni.io/instance-id": "i-0bbbbbbbbbbbbbbb2",
    "vpcni.io/created-at": old,
  });
  const otherCluster = mk({
    "vpcni.io/cluster": "other",
    "vpcni.io/instance-id": INSTANCE,
    "vpcni.io/created-at": old,
  });
  const clusterOnly = mk({ "vpcni.io/cluster": "test-cluster", "vpcni.io/created-at": old });
  const leaked = mk({
    "vpcni.io/cluster": "test-cluster",
    "vpcni.io/instance-id": INSTANCE,
    "vpcni.io/created-at": old,
  });

  sim.faults.throttleProbability = 0.3;
  sim.faults.errorRate = 0.1;
  const root = await tempRoot();
  const daemon = await startDaemonOn(sim, root, {
    pools: [{ name: "default", warmIps: 4, warmEnis: 0, ipCooldownSeconds: 1 }],
    releaseDelaySeconds: 1,
    addTimeoutSeconds: 30,
  });
  const client = ipamClient(`${root}/ipam.sock`);
  try {
    // 50 pods in bursts of 10: all get an address on the first try.
    const ips: string[] = [];
    for (let burst = 0; burst < 5; burst++) {
      const rs = await Promise.all(
        Array.from({ length: 10 }, (_, i) => client.call(addReq(`f${burst * 10 + i}`))),
      );
      for (const r of rs) {
        assert.ok(r.ok && "allocation" in r, JSON.stringify(r));
        ips.push(r.allocation.ip);
      }
    }
    assert.equal(new Set(ips).size, 50, "no address twice");
    const held = new Set(simNodeEnis(sim).flatMap((e) => e.ips));
    for (const ip of ips) assert.ok(held.has(ip), `${ip} assigned in EC2`);

    // Churn some away so the pool shrinks (detach + delete under faults too).
    for (let i = 0; i < 40; i++) assert.ok((await client.call(delReq(`f${i}`))).ok);

    // The collector: only the ENI with both our cluster and our instance tags goes.
    assert.ok(
      await eventually(() => !sim.state.enis.has(leaked), 20_000),
      "our leaked ENI deleted",
    );
    for (const id of [untagged, otherInstance, otherCluster, clusterOnly]) {
      assert.ok(sim.state.enis.has(id), `${id} must not be touched`);
    }
    // No leaks: the daemon's ENIs are exactly the node's ENIs, none of ours left detached.
    const settled = await eventually(async () => {
      const enis = await fetch(`http://127.0.0.1:${daemon.introspectionAddr.port}/v1/enis`).then((
        r,
      ) => r.json()) as { id: string }[];
      const node = simNodeEnis(sim).map((e) => e.id).sort();
      return simDetachedOurs(sim).length === 0 &&
        JSON.stringify(enis.map((e) => e.id).sort()) === JSON.stringify(node);
    }, 30_000);
    assert.ok(settled, "every tagged ENI is attached and known, or gone");

    const m = await fetch(`http://127.0.0.1:${daemon.introspectionAddr.port}/metrics`).then((r) =>
      r.text()
    );
    assert.ok(metricValue(m, "vpcni_ec2_throttles_total") > 0, "throttles were seen and counted");
    assert.ok(metricValue(m, "vpcni_ec2_errors_total") > 0);
    assert.ok(metricValue(m, "vpcni_enis_deleted_total", { reason: "leaked" }) >= 1);
  } finally {
    client.close();
    await daemon.stop();
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});
