/**
 * Warm targets are reached at start and held through use; surplus goes back to EC2 only
 * after the hysteresis delay; a second ADD is refused; CHECK/DEL/GC/STATUS answer per protocol.
 */
import assert from "node:assert/strict";
import {
  addReq,
  delReq,
  eventually,
  INSTANCE,
  metricValue,
  simNodeEnis,
  standardScenario,
  startStack,
} from "./harness.ts";
import type { PoolView } from "../../proto/introspect.ts";

Deno.test("warm: targets reached at start and held while pods come and go", async () => {
  const stack = await startStack(standardScenario(), {
    pools: [
      { name: "default", warmEnis: 1, ipCooldownSeconds: 1 },
      {
        name: "internal",
        subnets: { tags: "zone=internal" },
        warmEnis: 0,
        warmIps: 5,
        minimumIps: 20,
      },
    ],
    releaseDelaySeconds: 1,
  });
  try {
    const pools = () => stack.introspect<PoolView[]>("/v1/pools");
    const byName = async (n: string) => (await pools()).find((p) => p.name === n)!;
    // m5.xlarge: 15 addresses per ENI, 14 for pods. warmEnis 1 → 14 free in the default pool;
    // internal: minimumIps 20 → at least 20 held (two ENIs in internal subnets).
    assert.ok(await eventually(async () => (await byName("default")).free >= 14, 15_000));
    assert.ok(await eventually(async () => (await byName("internal")).total >= 20, 15_000));
    const internal = await byName("internal");
    assert.equal(internal.enis, 2);

    // Every address the daemon counts is assigned in EC2 to the right ENI.
    const simIps = new Set(simNodeEnis(stack.sim).flatMap((e) => e.ips));
    const enis = await stack.introspect<{ ips: string[] }[]>("/v1/enis");
    for (const e of enis) for (const ip of e.ips) assert.ok(simIps.has(ip), ip);

    // 10 pods in the default pool: the pool grows back to 14 free.
    for (let i = 0; i < 10; i++) {
      const r = await stack.call(addReq(`w${i}`));
      assert.ok(r.ok, JSON.stringify(r));
    }
    assert.ok(await eventually(async () => (await byName("default")).free >= 14, 15_000));
    const held = await byName("default");
    assert.equal(held.used, 10);

    // Held: with nothing changing, no EC2 mutations happen for a while.
    const before = metricValue(await stack.metrics(), "vpcni_ec2_calls_total", {
      action: "AssignPrivateIpAddresses",
    });
    await new Promise((r) => setTimeout(r, 1500));
    const after = metricValue(await stack.metrics(), "vpcni_ec2_calls_total", {
      action: "AssignPrivateIpAddresses",
    });
    assert.equal(after, before, "a pool at its target makes no EC2 calls");

    // All pods go: after cooldown + release delay, the pool shrinks back to its target
    // (one ENI's worth free): the idle second ENI is detached and deleted in EC2.
    assert.equal(held.enis, 2);
    const second =
      (await stack.introspect<{ id: string; pool: string; deviceIndex: number }[]>("/v1/enis"))
        .find((e) => e.pool === "default" && e.deviceIndex > 0)!;
    for (let i = 0; i < 10; i++) await stack.call(delReq(`w${i}`));
    const t0 = Date.now();
    assert.ok(
      await eventually(async () => {
        const p = await byName("default");
        return p.used === 0 && p.total === 14 && p.enis === 1;
      }, 30_000),
      JSON.stringify(await byName("default")),
    );
    assert.ok(Date.now() - t0 >= 1000, "released only after cooldown and the release delay");
    assert.ok(
      await eventually(() => !stack.sim.state.enis.has(second.id), 10_000),
      "the surplus ENI is deleted in EC2",
    );
  } finally {
    await stack.close();
  }
});

Deno.test("warm: second ADD refused, CHECK, DEL idempotent, GC, STATUS, bad requests", async () => {
  const stack = await startStack(standardScenario(), {
    pools: [{ name: "default", warmIps: 3, warmEnis: 0 }],
  });
  try {
    const a = await stack.call(addReq("p1"));
    assert.ok(a.ok && "allocation" in a);
    const again = await stack.call(addReq("p1"));
    assert.equal(!again.ok && again.code, 106, "a second ADD of a held attachment is refused");
    const alloc = a.allocation;
    assert.equal(alloc.eni.primary, alloc.eni.deviceIndex === 0);
    assert.equal(alloc.eni.gateway, "10.0.0.1");
    assert.deepEqual(alloc.vpcCidrs, ["10.0.0.0/16"]);
    assert.equal(alloc.nodeIps.length, 1);
    const eni = stack.sim.state.enis.get(alloc.eni.id)!;
    assert.equal(eni.attachment?.instanceId, INSTANCE);
    assert.ok(eni.privateIps.some((p) => p.address === alloc.ip && !p.primary));
    assert.equal(eni.mac.toLowerCase(), alloc.eni.mac);

    const check = await stack.call({
      op: "check",
      network: "vpcni",
      containerId: "c-p1",
      ifName: "eth0",
    });
    assert.ok(check.ok && "allocation" in check && check.allocation.ip === alloc.ip);
    const unknown = await stack.call({
      op: "check",
      network: "vpcni",
      containerId: "nope",
      ifName: "eth0",
    });
    assert.equal(!unknown.ok && unknown.code, 3);

    const del = await stack.call(delReq("p1"));
    assert.ok(del.ok && "released" in del && del.released.length === 1);
    const del2 = await stack.call(delReq("p1"));
    assert.ok(del2.ok && "released" in del2 && del2.released.length === 0);
    const cds = await stack.introspect<{ ip: string }[]>("/v1/cooldowns");
    assert.ok(cds.some((c) => c.ip === alloc.ip), "a released address cools down");

    await stack.call(addReq("g1"));
    await stack.call(addReq("g2"));
    const gc = await stack.call({
      op: "gc",
      network: "vpcni",
      validAttachments: [{ containerId: "c-g1", ifName: "eth0" }],
    });
    assert.ok(gc.ok && "released" in gc);
    assert.deepEqual(gc.released.map((r) => r.containerId), ["c-g2"]);

    const st = await stack.call({ op: "status" });
    assert.ok(st.ok && "available" in st && st.pool === "default" && st.canGrow);

    const badVersion = await stack.call({ version: 9, op: "status" });
    assert.equal(!badVersion.ok && badVersion.code, 1);
    const badBody = await stack.call({ op: "add", network: "vpcni" });
    assert.equal(!badBody.ok && badBody.code, 6);
    const badPool = await stack.call(addReq("x", { "vpcni.io/pool": "nope" }));
    assert.equal(!badPool.ok && badPool.code, 7);

    const mode = (await Deno.stat(`${stack.root}/ipam.sock`)).mode! & 0o777;
    assert.equal(mode, 0o600);
  } finally {
    await stack.close();
  }
});
