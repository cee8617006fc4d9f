/**
 * An ADD that waits for the pool to grow, through the installed plugin against the real
 * daemon on the simulator, with EC2 made slow (the simulator's latency fault):
 * - with the default conflist, an ADD whose address takes longer than the other verbs'
 *   5-second bound still gets it (the plugin's ADD bound is the CRI's, the daemon's
 *   `addTimeoutSeconds` decides);
 * - with a short `daemonTimeoutMs`, the daemon gives up early enough to answer within it,
 *   with its own reason, and holds nothing for the pod its runtime stopped waiting for.
 */
import assert from "node:assert/strict";
import { kernelState, linkNames } from "../helpers/cni_kernel_state.ts";
import { eventually, nodeEniMacs, type Stack } from "../ipam/harness.ts";
import { addEniLinks, podEnv, runVpcni, type TestNode } from "./harness.ts";
import { withDaemonNode } from "./daemon_node.ts";

/** EC2's answer to the growth an ADD needs takes this long (AWS-side latency). */
const SLOW_EC2_MS = 7_000;

const withSlowEc2 = (fn: (node: TestNode, stack: Stack) => Promise<void>) =>
  // No warm address: the first ADD needs EC2.
  withDaemonNode(
    [{ name: "default", warmIps: 0, warmEnis: 0, ipCooldownSeconds: 0 }],
    fn,
    async (node, stack) => {
      stack.sim.faults.latencyMs = { AssignPrivateIpAddresses: SLOW_EC2_MS };
      // The primary ENI's link: the pool grows there.
      await addEniLinks(node, nodeEniMacs(stack));
    },
  );

const conflist = (socket: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    cniVersion: "1.1.0",
    name: "vcn-wait",
    type: "vpcni",
    datapath: "veth",
    mtu: 1500,
    daemonSocket: socket,
    ...extra,
  });

Deno.test("an ADD that waits longer than 5 s for EC2 gets its address through the default conflist", async () => {
  await withSlowEc2(async (node, stack) => {
    const conf = conflist(`${stack.root}/ipam.sock`);
    const pod = await node.pod();
    const t0 = performance.now();
    const add = await runVpcni(node, podEnv("ADD", "vcn-wait-a", pod.path), conf);
    const waitedMs = performance.now() - t0;
    assert.equal(add.code, 0, `${add.stdout}\n${add.stderr}`);
    assert.ok(waitedMs >= SLOW_EC2_MS, `the ADD waited ${waitedMs} ms, EC2 takes ${SLOW_EC2_MS}`);
    const ip = (add.json?.ips as { address: string }[])[0].address.split("/")[0];
    const held = await stack.call({
      op: "check",
      network: "vcn-wait",
      containerId: "vcn-wait-a",
      ifName: "eth0",
    });
    assert.ok(held.ok && "allocation" in held && held.allocation.ip === ip, JSON.stringify(held));
    const del = await runVpcni(node, podEnv("DEL", "vcn-wait-a", pod.path), conf);
    assert.equal(del.code, 0, del.stdout);
  });
});

Deno.test("with a short daemonTimeoutMs the daemon answers within it, with its reason, and holds nothing", async () => {
  await withSlowEc2(async (node, stack) => {
    const conf = conflist(`${stack.root}/ipam.sock`, { daemonTimeoutMs: 3000 });
    const pod = await node.pod();
    const nodeBefore = await kernelState(node.node.name);
    const podBefore = await linkNames(pod.name);
    const add = await runVpcni(node, podEnv("ADD", "vcn-wait-b", pod.path), conf);
    assert.notEqual(add.code, 0);
    assert.equal(add.json?.code, 11, add.stdout);
    // The daemon's own answer, not the plugin giving up on a silent daemon.
    assert.match(String(add.json?.msg), /no free address in pool default/);
    assert.match(String(add.json?.details), /daemonTimeoutMs/);
    // The growth lands after the runtime stopped waiting: the pod gets nothing from it.
    const grown = await eventually(async () => {
      const s = await stack.call({ op: "status" });
      return s.ok && "available" in s && s.available > 0;
    }, 4 * SLOW_EC2_MS);
    assert.ok(grown, "the pool grew once EC2 answered");
    const held = await stack.call({
      op: "check",
      network: "vcn-wait",
      containerId: "vcn-wait-b",
      ifName: "eth0",
    });
    assert.ok(!held.ok && held.code === 3, `the pod holds nothing: ${JSON.stringify(held)}`);
    assert.deepEqual(await kernelState(node.node.name), nodeBefore, "the node is as before");
    assert.deepEqual(await linkNames(pod.name), podBefore, "the pod netns is as before");
    // The runtime's DEL after a failed ADD succeeds.
    const del = await runVpcni(node, podEnv("DEL", "vcn-wait-b", pod.path), conf);
    assert.equal(del.code, 0, del.stdout);
  });
});
