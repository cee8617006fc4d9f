/**
 * When the warm loop grows and shrinks a pool, against the in-memory cloud
 * (tests/helpers/memory_cloud.ts): a pool is brought to its target, a surplus goes back to EC2
 * only after `releaseDelaySeconds`, never below the target or an address in use or cooling,
 * and a release EC2 refuses leaves memory and EC2 agreeing.
 */
import assert from "node:assert/strict";
import { addOf, keyOf, MemoryCloud, memoryNode } from "../tests/helpers/memory_cloud.ts";

/** Lets growth the loop started run to its end. */
async function settle(node: Awaited<ReturnType<typeof memoryNode>>) {
  for (const p of node.pools.pools.keys()) await node.pools.growth.grow(p);
}

Deno.test("warm loop: an idle ENI goes back to EC2 after the release delay, not before", async () => {
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 5 });
  const node = await memoryNode(cloud, {
    config: {
      releaseDelaySeconds: 60,
      pools: [{ name: "default", warmEnis: 0, warmIps: 0, ipCooldownSeconds: 0 }],
    },
  });
  // Eight pods fill the primary ENI and a second one; then they all go.
  for (let i = 0; i < 8; i++) assert.ok((await node.pools.add(addOf(`p${i}`))).ok);
  assert.equal(cloud.enis.size, 2);
  for (let i = 0; i < 8; i++) await node.pools.del(keyOf(`p${i}`));
  await node.pools.tick();
  assert.equal(cloud.count("detachEni"), 0, "a surplus is not released at once");
  node.clock.now += 30_000;
  await node.pools.tick();
  assert.equal(cloud.count("detachEni"), 0);
  node.clock.now += 30_000;
  await node.pools.tick();
  assert.equal(cloud.count("detachEni"), 1);
  assert.equal(cloud.count("deleteEni"), 1);
  assert.deepEqual([...cloud.enis.keys()], ["eni-1"], "only the primary ENI is left in EC2");
  assert.deepEqual([...node.state.enis.keys()], ["eni-1"], "and in the node state");
  // The primary ENI's addresses are single ones: they go as well (warmIps 0).
  assert.equal(cloud.assigned().length, 0);
  assert.equal(node.pools.view.stats("default").total, 0);
});

Deno.test("warm loop: a surplus never takes a pool below its target or an address in use", async () => {
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 10 });
  const node = await memoryNode(cloud, {
    config: {
      releaseDelaySeconds: 0,
      pools: [{ name: "default", warmEnis: 0, warmIps: 2, ipCooldownSeconds: 30 }],
    },
  });
  const held: string[] = [];
  for (let i = 0; i < 9; i++) {
    const r = await node.pools.add(addOf(`p${i}`));
    assert.ok(r.ok && "allocation" in r);
    held.push(r.allocation.ip);
  }
  await settle(node);
  // Six pods go: three cool down, three more are freed at once once their cooldown ends.
  for (let i = 0; i < 6; i++) await node.pools.del(keyOf(`p${i}`));
  await node.pools.tick();
  for (const ip of held.slice(0, 6)) {
    assert.ok(cloud.assigned().includes(ip), `cooling ${ip} was given back to EC2`);
  }
  node.clock.now += 30_000;
  await node.pools.tick();
  await settle(node);
  const w = node.pools.view.warm("default");
  assert.equal(w.shortfall, 0, `the pool is below its target: ${JSON.stringify(w)}`);
  for (const ip of held.slice(6)) assert.ok(cloud.assigned().includes(ip), `${ip} is in use`);
  assert.ok(cloud.count("unassignIps") >= 1, "the surplus went back");
  assert.ok(w.s.free <= 2 + 2, `free ${w.s.free}: more than the target and its band left`);
});

Deno.test("warm loop: an unassign EC2 refuses keeps the addresses, and the next step retries", async () => {
  const cloud = new MemoryCloud({ maxEnis: 1, ipv4PerEni: 10 });
  const node = await memoryNode(cloud, {
    config: {
      releaseDelaySeconds: 0,
      pools: [{ name: "default", warmEnis: 0, warmIps: 1, ipCooldownSeconds: 0 }],
    },
  });
  for (let i = 0; i < 6; i++) assert.ok((await node.pools.add(addOf(`p${i}`))).ok);
  await settle(node);
  for (let i = 0; i < 6; i++) await node.pools.del(keyOf(`p${i}`));
  cloud.fail("unassignIps", "RequestLimitExceeded");
  await node.pools.tick();
  const inMemory = [...node.state.enis.get("eni-1")!.ips].sort();
  assert.deepEqual(inMemory, cloud.assigned(), "memory and EC2 agree after the refusal");
  assert.ok(node.pools.view.stats("default").free >= 6, "the addresses still serve the pool");
  await node.pools.tick();
  assert.equal(cloud.count("unassignIps"), 2);
  assert.deepEqual([...node.state.enis.get("eni-1")!.ips].sort(), cloud.assigned());
  assert.ok(cloud.assigned().length < 6, "the retry gave the surplus back");
});

Deno.test("warm loop: a pool below its minimum grows without any ADD", async () => {
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 5 });
  const node = await memoryNode(cloud, {
    config: { pools: [{ name: "default", warmEnis: 0, warmIps: 0, minimumIps: 6 }] },
  });
  await node.pools.tick();
  await settle(node);
  assert.equal(node.pools.view.stats("default").total, 6);
  assert.equal(cloud.assigned().length, 6);
  await node.pools.tick();
  await settle(node);
  assert.equal(cloud.assigned().length, 6, "nothing more is asked once the minimum is held");
});

Deno.test("warm loop: a detach EC2 refuses leaves the ENI serving the pool", async () => {
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 5 });
  const node = await memoryNode(cloud, {
    config: {
      releaseDelaySeconds: 0,
      pools: [{ name: "default", warmEnis: 0, warmIps: 0, ipCooldownSeconds: 0 }],
    },
  });
  for (let i = 0; i < 6; i++) assert.ok((await node.pools.add(addOf(`p${i}`))).ok);
  for (let i = 0; i < 6; i++) await node.pools.del(keyOf(`p${i}`));
  cloud.fail("detachEni", "RequestLimitExceeded");
  await node.pools.tick();
  assert.equal(cloud.count("detachEni"), 1);
  const second = [...node.state.enis.values()].find((e) => e.deviceIndex === 1);
  assert.ok(second && !second.releasing, "the ENI is still the pool's");
  assert.ok(cloud.enis.get(second.id)?.attachment, "and still attached in EC2");
  const r = await node.pools.add(addOf("x"));
  assert.ok(r.ok, "its addresses serve ADDs");
  await node.pools.del(keyOf("x"));
  await node.pools.tick();
  assert.equal(cloud.enis.has(second.id), false, "the next step released it");
  assert.equal(node.state.enis.has(second.id), false);
});
