/**
 * A second ADD of a live attachment (same container id and ifname, into its own netns or
 * another) against the real IPAM daemon on the simulator: refused with code 106, and the
 * live pod keeps its address, its kernel objects and its reservation. Driven through the
 * real reference `ptp` (vpcni as its IPAM plugin, both orders of failure) and through vpcni
 * as the main plugin.
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { ipJson, run } from "../helpers/sh.ts";
import { peerBin } from "../helpers/peers.ts";
import type { TestNetns } from "../helpers/netns.ts";
import { nodeEniMacs, type Stack } from "../ipam/harness.ts";
import { withDaemonNode } from "./daemon_node.ts";
import {
  addEniLinks,
  assertNoStack,
  type PluginRun,
  podEnv,
  runVpcni,
  type TestNode,
} from "./harness.ts";

/** Runs the real ptp once inside the node netns. */
async function runPtp(
  node: TestNode,
  env: Record<string, string>,
  stdin: string,
): Promise<PluginRun> {
  const r = await run([peerBin("ptp")], {
    netns: node.node.name,
    env: { CNI_PATH: node.bin.dir, ...env },
    stdin,
  });
  let json: Record<string, unknown> | undefined;
  try {
    json = JSON.parse(r.stdout);
  } catch {
    json = undefined;
  }
  return { ...r, json };
}

/** The daemon's reservation of an attachment, or its error code. */
async function held(stack: Stack, network: string, containerId: string) {
  const r = await stack.call({ op: "check", network, containerId, ifName: "eth0" });
  return r.ok && "allocation" in r ? r.allocation.ip : `code ${!r.ok && r.code}`;
}

async function podAddrs(pod: TestNetns): Promise<string[]> {
  const links = await ipJson<{ ifname: string; addr_info: { local: string }[] }[]>(
    ["-4", "addr", "show"],
    pod.name,
  );
  return links.filter((l) => l.ifname !== "lo").flatMap((l) => l.addr_info.map((a) => a.local));
}

const withDaemon = (fn: (node: TestNode, stack: Stack) => Promise<void>) =>
  withDaemonNode([{ name: "default", warmIps: 4, warmEnis: 0 }], fn);

Deno.test("ptp + ipam vpcni: a second ADD of a live attachment is refused, the pod keeps its address", async () => {
  await withDaemon(async (node, stack) => {
    const network = "vcn-dup-ptp";
    const socket = `${stack.root}/ipam.sock`;
    const conf = JSON.stringify({
      cniVersion: "1.1.0",
      name: network,
      type: "ptp",
      ipMasq: false,
      mtu: 1500,
      ipam: { type: "vpcni", daemonSocket: socket, daemonTimeoutMs: 30_000 },
    });
    const env = (cmd: string, id: string, pod: TestNetns) => podEnv(cmd, id, pod.path);
    const podA = await node.pod();
    const add = await runPtp(node, env("ADD", "pod-a", podA), conf);
    assert.equal(add.code, 0, add.stdout + add.stderr);
    const ipA = await held(stack, network, "pod-a");
    assert.deepEqual(await podAddrs(podA), [ipA]);
    const nodeAfterA = await kernelState(node.node.name);
    const podAfterA = await kernelState(podA.name);

    // Order 1: the duplicate ADD, into the pod's own netns and into another one. vpcni
    // refuses it before ptp wires anything, so ptp has nothing to roll back.
    const podB = await node.pod();
    for (const target of [podA, podB]) {
      const dup = await runPtp(node, env("ADD", "pod-a", target), conf);
      assert.notEqual(dup.code, 0, `duplicate ADD into ${target.name} succeeded`);
      assert.equal(dup.json?.code, 106, dup.stdout);
      assert.match(
        String(dup.json?.msg),
        new RegExp(`already holds ${ipA.replaceAll(".", "\\.")}`),
      );
      assertNoStack(dup);
    }
    assert.deepEqual(await podAddrs(podB), [], "nothing was wired into the other netns");
    assert.equal(await held(stack, network, "pod-a"), ipA, "the live pod keeps its reservation");
    assert.deepEqual(await kernelState(node.node.name), nodeAfterA);
    assert.deepEqual(await kernelState(podA.name), podAfterA);

    // Order 2: vpcni reserves for a new attachment, then ptp fails (eth0 already exists in
    // pod A's netns) and calls IPAM DEL as its rollback: only that new reservation goes.
    const clash = await runPtp(node, env("ADD", "pod-clash", podA), conf);
    assert.notEqual(clash.code, 0, "ptp cannot make a second eth0 in pod A's netns");
    assert.equal(await held(stack, network, "pod-clash"), "code 3", "ptp's rollback released it");
    assert.equal(await held(stack, network, "pod-a"), ipA, "pod A's address was not freed");
    assert.deepEqual(await kernelState(podA.name), podAfterA);

    // CHECK of the live pod still passes, and the next pod gets another address.
    const prev = JSON.stringify({ ...JSON.parse(conf), prevResult: add.json });
    const check = await runPtp(node, env("CHECK", "pod-a", podA), prev);
    assert.equal(check.code, 0, check.stdout + check.stderr);
    const podC = await node.pod();
    const addC = await runPtp(node, env("ADD", "pod-c", podC), conf);
    assert.equal(addC.code, 0, addC.stdout + addC.stderr);
    const ipC = await held(stack, network, "pod-c");
    assert.notEqual(ipC, ipA, "the live pod's address is never handed out again");

    for (const [id, pod] of [["pod-a", podA], ["pod-c", podC]] as const) {
      const del = await runPtp(node, env("DEL", id, pod), conf);
      assert.equal(del.code, 0, del.stdout + del.stderr);
      assert.equal(await held(stack, network, id), "code 3");
    }
  });
});

Deno.test("vpcni main plugin: a second ADD of a live attachment is refused, the pod keeps working", async () => {
  await withDaemon(async (node, stack) => {
    const network = "vcn-dup-main";
    // The node's ENIs as links with their MACs.
    await addEniLinks(node, nodeEniMacs(stack));
    const conf = JSON.stringify({
      cniVersion: "1.1.0",
      name: network,
      type: "vpcni",
      datapath: "veth",
      mtu: 1500,
      daemonSocket: `${stack.root}/ipam.sock`,
      daemonTimeoutMs: 30_000,
    });
    const env = (cmd: string, id: string, pod: TestNetns) => podEnv(cmd, id, pod.path);
    const podA = await node.pod();
    const add = await runVpcni(node, env("ADD", "main-a", podA), conf);
    assert.equal(add.code, 0, add.stdout + add.stderr);
    const ipA = await held(stack, network, "main-a");
    const nodeAfterA = await kernelState(node.node.name);
    const podAfterA = await kernelState(podA.name);

    const podB = await node.pod();
    const podBBefore = await kernelState(podB.name);
    for (const target of [podA, podB]) {
      const dup = await runVpcni(node, env("ADD", "main-a", target), conf);
      assert.equal(dup.code, 1, dup.stdout);
      assert.equal(dup.json?.code, 106, dup.stdout);
      assertNoStack(dup);
    }
    assert.equal(await held(stack, network, "main-a"), ipA);
    assert.deepEqual(await kernelState(node.node.name), nodeAfterA, "the node is unchanged");
    assert.deepEqual(await kernelState(podA.name), podAfterA, "the live pod is unchanged");
    assert.deepEqual(await kernelState(podB.name), podBBefore, "nothing wired into the other");
    const prev = JSON.stringify({ ...JSON.parse(conf), prevResult: add.json });
    const check = await runVpcni(node, env("CHECK", "main-a", podA), prev);
    assert.equal(check.code, 0, check.stdout + check.stderr);

    // A different container into the live pod's netns: the daemon reserves, the datapath
    // finds eth0 taken (code 4 naming CNI_IFNAME), and the rollback releases only that new
    // reservation; the live pod's eth0 is left alone.
    const clash = await runVpcni(node, env("ADD", "main-clash", podA), conf);
    assert.equal(clash.json?.code, 4, clash.stdout);
    assert.match(String(clash.json?.msg), /^CNI_IFNAME "eth0" already exists in CNI_NETNS /);
    assert.match(String(clash.json?.details), /^tried: attach of container main-clash/);
    assertNoStack(clash);
    assert.equal(await held(stack, network, "main-clash"), "code 3");
    assert.equal(await held(stack, network, "main-a"), ipA);
    assert.deepEqual(await kernelState(podA.name), podAfterA);

    const del = await runVpcni(node, env("DEL", "main-a", podA), prev);
    assert.equal(del.code, 0, del.stdout + del.stderr);
    assert.equal(await held(stack, network, "main-a"), "code 3");
  });
});
