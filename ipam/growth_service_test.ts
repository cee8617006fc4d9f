/**
 * How growth asks EC2, against the in-memory cloud (tests/helpers/memory_cloud.ts): in
 * batches, once for many waiting ADDs, a new ENI's addresses in its create call, and not again
 * during the backoff after a failure.
 */
import assert from "node:assert/strict";
import { addOf, MemoryCloud, memoryNode } from "../tests/helpers/memory_cloud.ts";
import { ACCOUNT_BUSY_MS } from "./growth_service.ts";

Deno.test("growth: a warm target in addresses is one AssignPrivateIpAddresses call", async () => {
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 10 });
  const node = await memoryNode(cloud, {
    config: { pools: [{ name: "default", warmEnis: 0, warmIps: 3 }] },
  });
  await node.pools.tick();
  await node.pools.growth.grow("default"); // the tick's run, if still in flight
  assert.equal(cloud.count("assignIps"), 1);
  assert.equal(node.pools.view.stats("default").free, 3);
  assert.equal(cloud.assigned().length, 3);
  // An ADD takes one: the pool is topped up again, in one more call.
  const r = await node.pools.add(addOf("a"));
  assert.ok(r.ok);
  await node.pools.growth.grow("default");
  assert.equal(node.pools.view.warm("default").shortfall, 0, "the pool is back at its target");
  assert.ok(cloud.count("assignIps") <= 2, `${cloud.count("assignIps")} assign calls`);
});

Deno.test("growth: many waiting ADDs are one run: fill the ENI, then one new ENI", async () => {
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 5 });
  const node = await memoryNode(cloud, {
    config: { pools: [{ name: "default", warmEnis: 0, warmIps: 0 }] },
  });
  const answers = await Promise.all(
    Array.from({ length: 6 }, (_, i) => node.pools.add(addOf(`p${i}`))),
  );
  assert.ok(answers.every((r) => r.ok), JSON.stringify(answers));
  // The primary ENI's 4 slots, then the other 2 with the new ENI's create: a few calls, not
  // one per pod, and one new ENI, not one per waiting ADD.
  assert.ok(cloud.count("assignIps") <= 2, `${cloud.count("assignIps")} assign calls`);
  assert.equal(cloud.count("createEni"), 1);
  assert.equal(cloud.count("attachEni"), 1);
  const created = [...cloud.enis.values()].find((e) => e.attachment?.deviceIndex === 1)!;
  assert.equal(created.privateIps.length - 1, 2, "the create call carried the addresses");
  // ADDs that hold their address while its checkpoint is written are not counted as still
  // waiting: a pool without a warm target holds what its pods use, no more.
  assert.equal(cloud.assigned().length, 6, `EC2 assigned ${cloud.assigned()}`);
});

Deno.test("growth: a pool sized in ENIs fills a new ENI in its create call", async () => {
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 5 });
  const node = await memoryNode(cloud, {
    config: { pools: [{ name: "default", warmEnis: 1, warmIps: 0 }] },
  });
  await node.pools.growth.grow("default");
  assert.equal(node.pools.view.stats("default").free, 4, "one ENI's worth free");
  // The first ADD leaves fewer free than an ENI's worth: a second ENI, enough for 4 pods.
  for (let i = 0; i < 4; i++) assert.ok((await node.pools.add(addOf(`p${i}`))).ok);
  await node.pools.growth.grow("default");
  assert.equal(cloud.count("createEni"), 1);
  assert.equal(cloud.count("assignIps"), 1, "only the primary ENI was filled by an assign call");
  assert.equal(node.pools.view.warm("default").shortfall, 0);
});

Deno.test("growth: after EC2 fails, the warm loop waits out the backoff before asking again", async () => {
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 5 });
  const node = await memoryNode(cloud, {
    config: { pools: [{ name: "default", warmEnis: 0, warmIps: 2 }] },
  });
  cloud.fail("assignIps", "RequestLimitExceeded");
  await node.pools.growth.grow("default");
  assert.equal(cloud.count("assignIps"), 1);
  assert.equal(node.pools.view.stats("default").free, 0);
  await node.pools.tick();
  await node.pools.tick();
  assert.equal(cloud.count("assignIps"), 1, "no call during the backoff");
  node.clock.now += 1_000;
  await node.pools.tick();
  await node.pools.growth.grow("default");
  assert.equal(cloud.count("assignIps"), 2);
  assert.equal(node.pools.view.stats("default").free, 2, "the pool reached its target");
});

Deno.test("growth: a full subnet is exhaustion, reported and not retried by each ADD", async () => {
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 5 }, [1]);
  const node = await memoryNode(cloud, {
    config: { addTimeoutSeconds: 2, pools: [{ name: "default", warmEnis: 0, warmIps: 0 }] },
  });
  const r = await node.pools.add(addOf("a"));
  assert.ok(!r.ok && r.code === 11, JSON.stringify(r));
  assert.equal(node.pools.view.growth("default").exhausted?.reason, "subnet_full");
  const before = cloud.count("assignIps") + cloud.count("createEni");
  const again = await node.pools.add(addOf("b"));
  assert.ok(!again.ok && again.code === 11);
  assert.equal(cloud.count("assignIps") + cloud.count("createEni"), before);
  const status = node.pools.status("default");
  assert.ok(status.ok && "canGrow" in status && status.canGrow === false);
});

Deno.test("growth: a prefix pool asks for one /28 and serves 16 pods from it", async () => {
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 5 });
  const node = await memoryNode(cloud, {
    config: { pools: [{ name: "default", warmEnis: 0, warmIps: 0, prefixDelegation: true }] },
  });
  const ips = new Set<string>();
  for (let i = 0; i < 16; i++) {
    const r = await node.pools.add(addOf(`p${i}`));
    assert.ok(r.ok && "allocation" in r, JSON.stringify(r));
    ips.add(r.allocation.ip);
  }
  assert.equal(ips.size, 16);
  assert.equal(cloud.count("assignPrefixes"), 1, "one call for the first 16 pods");
  assert.equal(cloud.count("assignIps") + cloud.count("createEni"), 0);
  const [prefix] = cloud.enis.get("eni-1")!.prefixes;
  const base = Number(prefix.split("/")[0].split(".")[3]);
  for (const ip of ips) {
    const last = Number(ip.split(".")[3]);
    assert.ok(last >= base && last < base + 16, `${ip} is outside ${prefix}`);
  }
});

Deno.test("growth: after EC2 throttles, new ENIs serve waiting pods and the warm ENI waits", async () => {
  const cloud = new MemoryCloud({ maxEnis: 4, ipv4PerEni: 5 });
  const node = await memoryNode(cloud, {
    config: { pools: [{ name: "default", warmEnis: 1, warmIps: 0 }] },
  });
  // The first pod's growth fills the primary ENI; the warm ENI's create is throttled.
  cloud.fail("createEni", "RequestLimitExceeded", 1);
  for (let i = 0; i < 4; i++) assert.ok((await node.pools.add(addOf(`p${i}`))).ok);
  await node.pools.growth.grow("default");
  assert.equal(cloud.count("createEni"), 1);
  assert.equal(node.pools.view.stats("default").total, 4, "the throttled create made nothing");
  // Two pods wait: one ENI for them (filled in its create call), not one more for the
  // warm target as an unthrottled pool would make at once.
  const waiting = [node.pools.add(addOf("w0")), node.pools.add(addOf("w1"))];
  assert.ok((await Promise.all(waiting)).every((r) => r.ok));
  assert.equal(cloud.count("createEni"), 2, "one ENI for the waiting pods");
  assert.equal(node.pools.view.stats("default").total, 8);
  // The warm target waits while the account is busy ...
  node.clock.now += 60_000;
  await node.pools.tick();
  await node.pools.growth.grow("default");
  assert.equal(cloud.count("createEni"), 2, "no warm ENI while the account is busy");
  // ... and is met once EC2 has not throttled the pool for a while.
  node.clock.now += ACCOUNT_BUSY_MS;
  await node.pools.tick();
  await node.pools.growth.grow("default");
  assert.equal(cloud.count("createEni"), 3, "the warm ENI once the account is calm");
  assert.equal(node.pools.view.warm("default").shortfall, 0);
});

Deno.test("growth: throttles back a pool's warm growth off to 2 min, but not before its first addresses", async () => {
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 10 });
  const node = await memoryNode(cloud, {
    config: { pools: [{ name: "default", warmEnis: 0, warmIps: 2 }] },
  });
  const growth = () => node.pools.view.growth("default");
  // EC2 throttles the next `n` assigns; growth is retried as soon as its backoff allows.
  const backoffAfterThrottles = async (n: number, start: () => Promise<unknown>) => {
    const before = cloud.count("assignIps");
    cloud.fail("assignIps", "RequestLimitExceeded", n);
    await start();
    while (cloud.count("assignIps") - before < n) {
      node.clock.now = Math.max(node.clock.now, growth().nextGrowAt);
      await node.pools.growth.grow("default");
    }
    return growth().nextGrowAt - node.clock.now;
  };
  // No address yet: the node is not ready until it has one, so the backoff stays at 30 s.
  assert.equal(await backoffAfterThrottles(10, async () => {}), 30_000);
  node.clock.now += 30_000;
  await node.pools.growth.grow("default");
  assert.equal(node.pools.view.stats("default").free, 2);
  // Once the pool has grown, a throttled warm target waits up to 2 minutes.
  const wait = await backoffAfterThrottles(10, () => node.pools.add(addOf("a")));
  assert.equal(wait, 120_000);
});
