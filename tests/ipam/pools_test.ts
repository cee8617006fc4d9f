/**
 * Pool routing by annotation, tag selectors, shared subnets, subnet exhaustion falling
 * through to the next subnet, and the ENI limit answering code 11 with the reason in metrics.
 */
import assert from "node:assert/strict";
import type { IpamResponse } from "../../proto/ipam.ts";
import {
  addReq,
  delReq,
  eventually,
  inCidr,
  INSTANCE,
  metricValue,
  simNodeEnis,
  standardScenario,
  startStack,
  SUBNETS,
} from "./harness.ts";

function ipOf(r: IpamResponse): string {
  assert.ok(r.ok && "allocation" in r, JSON.stringify(r));
  return r.allocation.ip;
}

Deno.test("pools: annotations route pods; tag selectors pick subnets; ENIs tagged", async () => {
  const stack = await startStack(standardScenario(), {
    pools: [
      { name: "default", warmIps: 2, warmEnis: 0 },
      {
        name: "internal",
        subnets: { tags: "zone=internal, tier in (pods)" },
        securityGroups: { tags: "role=pods" },
        warmIps: 2,
        warmEnis: 0,
      },
      { name: "dmz", subnets: { ids: [SUBNETS.dmz] }, warmIps: 0, warmEnis: 0 },
    ],
  });
  try {
    assert.ok(inCidr(ipOf(await stack.call(addReq("p0"))), "10.0.0.0/20"), "default → node subnet");
    const internal = ipOf(await stack.call(addReq("p1", { "vpcni.io/pool": "internal" })));
    assert.ok(
      inCidr(internal, "10.0.16.0/24") || inCidr(internal, "10.0.17.0/24"),
      `internal pool in an internal subnet of the node's AZ, got ${internal}`,
    );
    const dmz = await stack.call(addReq("p2", { "vpcni.io/subnet-selector": "zone=dmz" }));
    assert.ok(inCidr(ipOf(dmz), "10.0.19.0/24"));
    assert.ok(dmz.ok && "allocation" in dmz && dmz.allocation.pool === "dmz");
    const bySel = await stack.call(
      addReq("p3", { "vpcni.io/subnet-selector": "zone in (internal)" }),
    );
    assert.ok(bySel.ok && "allocation" in bySel && bySel.allocation.pool === "internal");
    const badSel = await stack.call(
      addReq("p4", { "vpcni.io/subnet-selector": "zone in internal" }),
    );
    assert.ok(
      !badSel.ok && badSel.code === 7 && /column 9/.test(badSel.msg),
      JSON.stringify(badSel),
    );
    const noPool = await stack.call(addReq("p5", { "vpcni.io/subnet-selector": "zone=nowhere" }));
    assert.ok(!noPool.ok && noPool.code === 7);

    // ENIs the daemon made: our tags, delete-on-termination, the pool's security groups,
    // never in the other AZ's subnet even though its tags match.
    const made = [...stack.sim.state.enis.values()].filter((e) =>
      e.tags.get("vpcni.io/cluster") === "test-cluster"
    );
    assert.ok(made.length >= 2);
    for (const e of made) {
      assert.equal(e.tags.get("vpcni.io/instance-id"), INSTANCE);
      assert.ok(!Number.isNaN(Date.parse(e.tags.get("vpcni.io/created-at") ?? "")));
      assert.equal(e.attachment?.deleteOnTermination, true, e.id);
      assert.notEqual(e.subnetId, SUBNETS.otherAz);
      if (e.tags.get("vpcni.io/pool") === "internal") assert.deepEqual(e.groupIds, ["sg-0a000002"]);
      if (e.tags.get("vpcni.io/pool") === "dmz") assert.deepEqual(e.groupIds, ["sg-0a000001"]);
    }
  } finally {
    await stack.close();
  }
});

Deno.test("pools: two ENIs share one subnet; allowSharedSubnets=false spreads them", async () => {
  const stack = await startStack(standardScenario(), {
    pools: [
      { name: "default", warmEnis: 0 },
      { name: "one", subnets: { ids: [SUBNETS.internalA] }, warmEnis: 0, minimumIps: 20 },
    ],
  });
  try {
    assert.ok(
      await eventually(
        () => simNodeEnis(stack.sim).filter((e) => e.tags["vpcni.io/pool"] === "one").length === 2,
        15_000,
      ),
    );
    const one = simNodeEnis(stack.sim).filter((e) => e.tags["vpcni.io/pool"] === "one");
    assert.deepEqual(one.map((e) => e.subnetId), [SUBNETS.internalA, SUBNETS.internalA]);
    assert.ok(one.reduce((n, e) => n + e.ips.length, 0) >= 20);
  } finally {
    await stack.close();
  }
  const spread = await startStack(standardScenario(), {
    pools: [
      { name: "default", warmEnis: 0 },
      {
        name: "spread",
        subnets: { tags: "zone=internal" },
        allowSharedSubnets: false,
        warmEnis: 0,
        minimumIps: 20,
      },
    ],
  });
  try {
    assert.ok(
      await eventually(
        () =>
          simNodeEnis(spread.sim).filter((e) => e.tags["vpcni.io/pool"] === "spread").length === 2,
        15_000,
      ),
    );
    const subnets = simNodeEnis(spread.sim).filter((e) => e.tags["vpcni.io/pool"] === "spread").map(
      (e) => e.subnetId,
    ).sort();
    assert.deepEqual(subnets, [SUBNETS.internalA, SUBNETS.internalB]);
  } finally {
    await spread.close();
  }
});

Deno.test("pools: a full subnet falls through to the next; none left → code 11 subnet_full", async () => {
  // random() = 0 makes the weighted pick take the first open subnet: the tiny /28 first.
  const stack = await startStack(standardScenario(), {
    pools: [
      { name: "default", warmEnis: 0 },
      { name: "spill", subnets: { tags: "zone in (tiny, dmz)" }, warmEnis: 0, warmIps: 4 },
      { name: "tinyonly", subnets: { ids: [SUBNETS.tiny] }, warmEnis: 0 },
    ],
    addTimeoutSeconds: 5,
  }, { random: () => 0 });
  try {
    const ips: string[] = [];
    for (let i = 0; i < 12; i++) {
      ips.push(ipOf(await stack.call(addReq(`s${i}`, { "vpcni.io/pool": "spill" }))));
    }
    assert.ok(inCidr(ips[0], "10.0.18.0/28"), `first pods in the tiny subnet, got ${ips[0]}`);
    assert.ok(ips.some((ip) => inCidr(ip, "10.0.19.0/24")), `later pods spill into dmz: ${ips}`);
    assert.equal(new Set(ips).size, ips.length);
    assert.ok(
      /AssignPrivateIpAddresses:InsufficientFreeAddressesInSubnet|CreateNetworkInterface:InsufficientFreeAddressesInSubnet/
        .test([...stack.sim.stats.errors.keys()].join()),
    );

    // The tiny subnet is now full and "tinyonly" has nowhere else to go.
    const r = await stack.call(addReq("t0", { "vpcni.io/pool": "tinyonly" }));
    assert.ok(!r.ok && r.code === 11, JSON.stringify(r));
    assert.match(r.details ?? "", /subnet_full/);
    const m = await stack.metrics();
    assert.equal(
      metricValue(m, "vpcni_pool_exhausted", { pool: "tinyonly", reason: "subnet_full" }),
      1,
    );
    assert.equal(
      metricValue(m, "vpcni_pool_exhausted", { pool: "tinyonly", reason: "eni_limit" }),
      0,
    );
    const pools = await stack.introspect<{ name: string; exhausted: { reason: string } | null }[]>(
      "/v1/pools",
    );
    assert.equal(pools.find((p) => p.name === "tinyonly")?.exhausted?.reason, "subnet_full");
  } finally {
    await stack.close();
  }
});

Deno.test("pools: ENI limit reached → code 11 at once, metric says eni_limit", async () => {
  // 2 ENIs × (4 − 1) = 6 pod addresses.
  const stack = await startStack(
    standardScenario({ type: "vt.small", maxEnis: 2, ipv4PerEni: 4 }),
    {
      pools: [{ name: "default", warmEnis: 0, warmIps: 0, ipCooldownSeconds: 8 }],
      addTimeoutSeconds: 15,
    },
  );
  try {
    const ips = [];
    for (let i = 0; i < 6; i++) ips.push(ipOf(await stack.call(addReq(`l${i}`))));
    assert.equal(new Set(ips).size, 6);
    const t0 = performance.now();
    const r = await stack.call(addReq("l6"));
    const waited = performance.now() - t0;
    assert.ok(!r.ok && r.code === 11, JSON.stringify(r));
    assert.match(r.details ?? "", /eni_limit/);
    assert.ok(waited < 10_000, "refused without waiting out the whole ADD timeout");
    const m = await stack.metrics();
    assert.equal(
      metricValue(m, "vpcni_pool_exhausted", { pool: "default", reason: "eni_limit" }),
      1,
    );
    assert.equal(
      metricValue(m, "vpcni_pool_exhausted", { pool: "default", reason: "subnet_full" }),
      0,
    );
    assert.equal(simNodeEnis(stack.sim).length, 2, "no ENI beyond the instance limit");
    const st = await stack.call({ op: "status" });
    assert.ok(st.ok && "canGrow" in st && st.canGrow === false && st.available === 0);

    // A waiting ADD (here: for a cooling address) is cancelled by a DEL of the same pod,
    // as a runtime sends when its ADD timed out: the pod must not keep an address.
    assert.ok((await stack.call(delReq("l0"))).ok);
    const waiting = stack.call(addReq("late"));
    await new Promise((r) => setTimeout(r, 300));
    assert.ok((await stack.call(delReq("late"))).ok);
    const late = await waiting;
    assert.ok(!late.ok && late.code === 11 && /cancelled/.test(late.msg), JSON.stringify(late));
    const allocs = await stack.introspect<{ containerId: string }[]>("/v1/allocations");
    assert.ok(!allocs.some((a) => a.containerId === "c-late"));
  } finally {
    await stack.close();
  }
});
