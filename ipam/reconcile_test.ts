/**
 * A restart after a crash, against the in-memory cloud (tests/helpers/memory_cloud.ts): the
 * node state is rebuilt from EC2, the checkpoint and the kernel, and no address a running pod
 * holds is handed out again, none EC2 took back is kept, none of a gone pod is leaked.
 */
import assert from "node:assert/strict";
import { hostKernelView, type KernelView } from "./kernel_view.ts";
import type { IpamResponse } from "../proto/ipam.ts";
import { addOf, keyOf, MemoryCloud, memoryNode } from "../tests/helpers/memory_cloud.ts";

const POOLS = { pools: [{ name: "default", warmEnis: 0, warmIps: 0, ipCooldownSeconds: 30 }] };

function ipOf(r: IpamResponse): string {
  assert.ok(r.ok && "allocation" in r, JSON.stringify(r));
  return r.allocation.ip;
}

/** A kernel where the pods named in `gone` have no netns any more, and `routed` are routed. */
function kernel(gone: string[], routed?: string[]): KernelView {
  return {
    podAlive: ({ netns }) => Promise.resolve(!gone.some((p) => netns === `/run/netns/${p}`)),
    routedPodIps: () => Promise.resolve(routed && new Set(routed)),
    ruledPodIps: () => Promise.resolve(routed && new Set(routed)),
  };
}

Deno.test("reconcile after a crash: live pods keep their addresses, gone ones cool down", async () => {
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 5 });
  const before = await memoryNode(cloud, { config: POOLS });
  const ip: Record<string, string> = {};
  for (const p of ["a", "b", "c", "d", "e"]) ip[p] = ipOf(await before.pools.add(addOf(p)));
  await before.pools.del(keyOf("e")); // cooling when the daemon dies
  const checkpoint = before.disk()!;
  // While the daemon is down: pod b is deleted, and c's address is taken back in EC2.
  const cEni = [...cloud.enis.values()].find((e) => e.privateIps.includes(ip.c))!;
  await cloud.unassignIps({ eniId: cEni.id, ips: [ip.c] });

  const after = await memoryNode(cloud, {
    config: POOLS,
    checkpoint,
    kernel: kernel(["b"]),
    now: before.clock.now + 1_000,
  });
  assert.equal(after.pools.check(keyOf("a"))?.ip, ip.a, "a running pod keeps its address");
  assert.equal(after.pools.check(keyOf("d"))?.ip, ip.d);
  assert.equal(after.pools.check(keyOf("b")), undefined, "the gone pod's address is released");
  assert.equal(after.pools.check(keyOf("c")), undefined, "an address EC2 took back is dropped");
  assert.deepEqual(
    { kept: after.report.kept, orphans: after.report.orphansReleased },
    { kept: 2, orphans: 1 },
  );
  const cooling = after.pools.view.cooldowns().map((c) => c.ip).sort();
  assert.deepEqual(cooling, [ip.b, ip.e].sort(), "b and e cool down; nothing is leaked");
  // New pods never get a held or cooling address (c's may come back: EC2 owns it again).
  const fresh = [];
  for (const p of ["f", "g", "h"]) fresh.push(ipOf(await after.pools.add(addOf(p))));
  for (const x of fresh) assert.ok(![ip.a, ip.d, ip.b, ip.e].includes(x), `${x} reused`);
  assert.equal(new Set(fresh).size, 3);
});

Deno.test("reconcile without a checkpoint: addresses the host routes to pods stay held", async () => {
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 5 });
  const before = await memoryNode(cloud, { config: POOLS });
  const a = ipOf(await before.pools.add(addOf("a")));
  const b = ipOf(await before.pools.add(addOf("b")));
  // The checkpoint is lost; the kernel still routes a's and b's addresses to their pods.
  const after = await memoryNode(cloud, { config: POOLS, kernel: kernel([], [a, b]) });
  assert.deepEqual(after.pools.view.routedUnknown(), [a, b].sort());
  const taken = [];
  for (const p of ["c", "d", "e"]) taken.push(ipOf(await after.pools.add(addOf(p))));
  assert.ok(!taken.includes(a) && !taken.includes(b), `a running pod's address reused: ${taken}`);
  // Pod a is deleted: its route goes, and after its cooldown its address serves again.
  assert.ok(await after.pools.allocator.releaseUnrouted(new Set([b])));
  assert.deepEqual(after.pools.view.routedUnknown(), [b]);
  assert.deepEqual(after.pools.view.cooldowns().map((c) => c.ip), [a]);
  assert.deepEqual(after.disk()!.routedUnknown, [b], "the checkpoint still holds b");
});

Deno.test("reconcile: a pod whose netns the daemon could not see keeps its address, though stat fails", async () => {
  const cloud = new MemoryCloud({ maxEnis: 3, ipv4PerEni: 5 });
  const before = await memoryNode(cloud, { config: POOLS });
  // Neither pod's netns path exists in the daemon's mount namespace. One was handed over by
  // the plugin (netnsHidden): a missing path says nothing about that pod.
  const hidden = ipOf(await before.pools.add({ ...addOf("h"), netnsHidden: true }));
  ipOf(await before.pools.add(addOf("g")));
  const checkpoint = before.disk()!;
  assert.equal(
    checkpoint.allocations.find((a) => a.containerId === "c-h")?.netnsHidden,
    true,
    "the checkpoint records that the daemon could not see the netns",
  );
  const after = await memoryNode(cloud, {
    config: POOLS,
    checkpoint,
    kernel: hostKernelView(),
    now: before.clock.now + 1_000,
  });
  assert.equal(after.pools.check(keyOf("h"))?.ip, hidden, "the live pod keeps its address");
  assert.equal(after.pools.check(keyOf("g")), undefined, "a pod whose netns is gone is freed");
  assert.deepEqual(
    { kept: after.report.kept, orphans: after.report.orphansReleased },
    { kept: 1, orphans: 1 },
  );
});
