/**
 * What an ADD and a DEL decide, against the in-memory cloud (tests/helpers/memory_cloud.ts):
 * which ENI an address comes from, that no address is handed out twice or leaked, and that
 * the checkpoint on disk agrees with what was answered.
 */
import assert from "node:assert/strict";
import type { IpamResponse, PodAllocation } from "../proto/ipam.ts";
import { addOf, keyOf, MemoryCloud, memoryNode } from "../tests/helpers/memory_cloud.ts";
import { addWaitMs } from "./pools.ts";

function allocationOf(r: IpamResponse): PodAllocation {
  assert.ok(r.ok && "allocation" in r, JSON.stringify(r));
  return r.allocation;
}

Deno.test("ADD: concurrent ADDs get distinct addresses EC2 assigned, lowest ENI first", async () => {
  // 3 ENIs of 4 secondary addresses each: room for 12 pods.
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 5 });
  const node = await memoryNode(cloud, {
    config: { pools: [{ name: "default", warmEnis: 0, warmIps: 0, ipCooldownSeconds: 0 }] },
  });
  const answers = await Promise.all(
    Array.from({ length: 10 }, (_, i) => node.pools.add(addOf(`p${i}`))),
  );
  const got = answers.map(allocationOf);
  const ips = got.map((a) => a.ip);
  assert.equal(new Set(ips).size, 10, `an address was handed out twice: ${ips}`);
  const assigned = new Set(cloud.assigned());
  for (const ip of ips) assert.ok(assigned.has(ip), `${ip} is not assigned by EC2`);
  // The primary ENI is filled before any other is used.
  assert.equal(got.filter((a) => a.eni.deviceIndex === 0).length, 4);
  // On disk: exactly the ten answered, no more, no fewer.
  const disk = node.disk()!.allocations.map((a) => a.ip).sort();
  assert.deepEqual(disk, [...ips].sort());
  // Growth was batched: 10 pods in 3 ENIs' worth of calls, not one call per pod.
  assert.ok(
    cloud.count("assignIps") + cloud.count("createEni") <= 4,
    JSON.stringify([...cloud.calls]),
  );
});

Deno.test("ADD: a second ADD of the same attachment is refused and keeps the address", async () => {
  const cloud = new MemoryCloud();
  const node = await memoryNode(cloud, {
    config: { pools: [{ name: "default", warmEnis: 0, warmIps: 2 }] },
  });
  await node.pools.tick();
  const first = allocationOf(await node.pools.add(addOf("a")));
  const again = await node.pools.add(addOf("a"));
  assert.ok(!again.ok && again.code === 106, JSON.stringify(again));
  assert.equal(node.pools.check(keyOf("a"))?.ip, first.ip);
});

Deno.test("ADD: a failed checkpoint write hands nothing out and leaks nothing", async () => {
  const cloud = new MemoryCloud();
  const node = await memoryNode(cloud, {
    config: { pools: [{ name: "default", warmEnis: 0, warmIps: 1 }] },
  });
  await node.pools.tick();
  const freeBefore = node.pools.view.stats("default").free;
  node.failWrites.on = true;
  const refused = await node.pools.add(addOf("a"));
  assert.ok(!refused.ok && refused.code === 5, JSON.stringify(refused));
  assert.equal(node.pools.check(keyOf("a")), undefined, "no allocation held in memory");
  assert.equal(node.pools.view.stats("default").free, freeBefore, "the address is free again");
  node.failWrites.on = false;
  const retried = allocationOf(await node.pools.add(addOf("a")));
  assert.deepEqual(node.disk()!.allocations.map((a) => a.ip), [retried.ip]);
});

Deno.test("DEL: the address cools down before another pod gets it, and is not leaked", async () => {
  const cloud = new MemoryCloud({ maxEnis: 1, ipv4PerEni: 3 });
  const node = await memoryNode(cloud, {
    config: { pools: [{ name: "default", warmEnis: 0, warmIps: 0, ipCooldownSeconds: 30 }] },
  });
  const a = allocationOf(await node.pools.add(addOf("a")));
  const released = await node.pools.del(keyOf("a"));
  assert.deepEqual(released.map((r) => r.ip), [a.ip]);
  assert.equal(node.disk()!.allocations.length, 0, "the release is on disk");
  const b = allocationOf(await node.pools.add(addOf("b")));
  assert.notEqual(b.ip, a.ip, "a cooling address went to another pod");
  node.clock.now += 30_000;
  await node.pools.tick();
  const c = allocationOf(await node.pools.add(addOf("c")));
  assert.equal(c.ip, a.ip, "after its cooldown the address serves again (nothing leaked)");
});

Deno.test("ADD: a pool at the ENI limit answers 11 without asking EC2 again", async () => {
  const cloud = new MemoryCloud({ maxEnis: 1, ipv4PerEni: 3 });
  const node = await memoryNode(cloud, {
    config: {
      addTimeoutSeconds: 5,
      pools: [{ name: "default", warmEnis: 0, warmIps: 0, ipCooldownSeconds: 0 }],
    },
  });
  allocationOf(await node.pools.add(addOf("a")));
  allocationOf(await node.pools.add(addOf("b")));
  const calls = cloud.count("assignIps") + cloud.count("createEni");
  const full = await node.pools.add(addOf("c"));
  assert.ok(!full.ok && full.code === 11, JSON.stringify(full));
  assert.match(full.details ?? "", /eni_limit/);
  const again = await node.pools.add(addOf("d"));
  assert.ok(!again.ok && again.code === 11);
  assert.ok(
    cloud.count("assignIps") + cloud.count("createEni") - calls <= 1,
    "an exhausted pool is not asked of EC2 in a loop",
  );
  // A DEL frees an address at once (no cooldown): the next ADD gets it.
  await node.pools.del(keyOf("a"));
  allocationOf(await node.pools.add(addOf("e")));
});

Deno.test("DEL during an ADD waiting for growth: the ADD is cancelled and holds nothing", async () => {
  const cloud = new MemoryCloud();
  const node = await memoryNode(cloud, {
    config: { pools: [{ name: "default", warmEnis: 0, warmIps: 0 }] },
  });
  const adding = node.pools.add(addOf("a"));
  await node.pools.del(keyOf("a"));
  const r = await adding;
  assert.ok(!r.ok && r.code === 11, JSON.stringify(r));
  assert.equal(node.pools.check(keyOf("a")), undefined, "a cancelled ADD holds no address");
  assert.equal(node.disk()?.allocations.length ?? 0, 0);
  const s = node.pools.view.stats("default");
  assert.ok(s.total > 0 && s.free === s.total, `what growth got is free: ${JSON.stringify(s)}`);
});

Deno.test("ADD: the pool annotation picks the pool, and its address comes from its subnet", async () => {
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 5 }, [200, 200]);
  const node = await memoryNode(cloud, {
    config: {
      pools: [
        { name: "default", warmEnis: 0, warmIps: 0 },
        { name: "other", subnets: { ids: ["subnet-1"] }, warmEnis: 0, warmIps: 0 },
      ],
    },
  });
  const a = allocationOf(await node.pools.add(addOf("a", { "vpcni.io/pool": "other" })));
  assert.equal(a.pool, "other");
  assert.equal(a.eni.subnetId, "subnet-1");
  assert.notEqual(a.eni.deviceIndex, 0, "the primary ENI is the default pool's");
  const b = allocationOf(await node.pools.add(addOf("b")));
  assert.equal(b.eni.deviceIndex, 0);
});

Deno.test("ADD: the wait for an address ends early enough to answer within the plugin's bound", () => {
  // An older plugin sends no bound: addTimeoutSeconds alone.
  assert.equal(addWaitMs(20), 20_000);
  // The default plugin waits 120 s for an ADD: the daemon's 20 s decide.
  assert.equal(addWaitMs(20, 120_000), 20_000);
  assert.equal(addWaitMs(300, 120_000), 118_000, "2 s are left for the wiring");
  // A short daemonTimeoutMs: a quarter of it is left for the wiring and the answer.
  assert.equal(addWaitMs(20, 3000), 2250);
  assert.equal(addWaitMs(20, 100), 75);
});

Deno.test("STATUS: a warm pool is not ready before its first addresses, and stays ready after", async () => {
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 5 });
  const node = await memoryNode(cloud, {
    config: { pools: [{ name: "default", warmEnis: 0, warmIps: 2, ipCooldownSeconds: 0 }] },
  });
  // EC2 throttles the first growth: the node must not take pods yet.
  cloud.fail("assignIps", "RequestLimitExceeded");
  await node.pools.growth.grow("default");
  const starting = node.pools.status();
  assert.ok(!starting.ok && starting.code === 50, JSON.stringify(starting));
  assert.match(starting.msg, /no address yet/);
  node.clock.now += 60_000;
  await node.pools.growth.grow("default");
  const ready = node.pools.status();
  assert.ok(ready.ok && "available" in ready && ready.available === 2, JSON.stringify(ready));
  // Pods take every address: STATUS still says ready while the pool grows again.
  allocationOf(await node.pools.add(addOf("a")));
  allocationOf(await node.pools.add(addOf("b")));
  cloud.fail("assignIps", "RequestLimitExceeded", 5);
  await node.pools.growth.grow("default");
  const busy = node.pools.status();
  assert.ok(busy.ok && "canGrow" in busy && busy.canGrow, JSON.stringify(busy));
});

Deno.test("STATUS: a pool with no warm target is ready at once (its ADDs bring addresses)", async () => {
  const cloud = new MemoryCloud();
  const node = await memoryNode(cloud, {
    config: { pools: [{ name: "default", warmEnis: 0, warmIps: 0 }] },
  });
  const s = node.pools.status();
  assert.ok(s.ok && "available" in s && s.available === 0, JSON.stringify(s));
});
