/**
 * Egress beyond the VPC on the ipvlan datapaths, on Debian's kernel in the kernel lane (this
 * host's kernel has no ipvlan). ipvlan-l3s pods' packets pass through the host's output and
 * postrouting hooks, so the host SNATs them like veth pods; ipvlan-l2 pods' packets leave
 * through the ENI without ever entering the host's netfilter, so the same ruleset cannot
 * reach them (and the daemon refuses `snat: node` with ipvlan-l2).
 * Run: deno task test:kernel tests/kernel/egress_ipvlan.kernel.ts
 */
import assert from "node:assert/strict";
import { isRoot } from "../helpers/netns.ts";
import { egressFailures } from "../helpers/egress_world.ts";

async function requireIpvlan(): Promise<void> {
  assert.ok(isRoot(), "the ipvlan egress tests need root");
  const mods = await Deno.readTextFile("/proc/modules").catch(() => "");
  const builtin = await Deno.stat("/sys/module/ipvlan").then(() => true, () => false);
  assert.ok(
    mods.includes("ipvlan ") || builtin,
    "this kernel has no ipvlan: run through 'deno task test:kernel tests/kernel/egress_ipvlan.kernel.ts'",
  );
}

Deno.test("ipvlan-l3s egress: the host SNATs the pod to the node's address; an excluded CIDR sees the pod", async () => {
  await requireIpvlan();
  assert.deepEqual(await egressFailures("ipvlan-l3s", true), []);
});

Deno.test("ipvlan-l2 egress: the pod's packets never reach the host, so it stays cut off from the internet even with the ruleset in place", async () => {
  await requireIpvlan();
  assert.deepEqual(await egressFailures("ipvlan-l2", false), []);
});
