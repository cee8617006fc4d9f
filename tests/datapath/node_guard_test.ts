/**
 * The datapath's own guards, on this kernel in netns the tests create (prefix `vdg`): it
 * refuses to treat the netns it runs in as a pod's, never deletes a link with an ENI's MAC,
 * removes the rules of the address the kernel routes to the attachment (not of another pod
 * a stale caller names), and bounds the pod's MTU by the ENI's link without changing it.
 */
import assert from "node:assert/strict";
import {
  attachPod,
  checkPod,
  DatapathInputError,
  detachPod,
  hostVethName,
} from "../../cni/datapath/mod.ts";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { onNode, secondaryEni, VETH_CFG, withEniNode } from "../helpers/datapath_node.ts";
import type { TestNetns } from "../helpers/netns.ts";
import { ipJson, sh } from "../helpers/sh.ts";

const CFG = VETH_CFG;
const ENI1 = secondaryEni("02:00:00:ab:01:00");

async function mtuOf(netns: string, link: string): Promise<number> {
  return (await ipJson<{ mtu: number }[]>(["link", "show", link], netns))[0].mtu;
}

async function rulesOf(node: TestNetns, ip: string): Promise<number[]> {
  const rules = await ipJson<{ priority: number; src?: string; dst?: string }[]>(
    ["-4", "rule", "show"],
    node.name,
  );
  return rules.filter((r) => r.src === ip || r.dst === ip).map((r) => r.priority).sort();
}

Deno.test("datapath: the netns it runs in is never wired, checked or torn down as a pod's", async () => {
  await withEniNode({ prefix: "vdg", eni: ENI1 }, async (node, _pods, at) => {
    const before = await kernelState(node.name);
    const machine = await kernelState();
    // In this test process the thread sits in the node netns while /proc/self names the
    // machine's own: neither is ever a pod's.
    for (const netns of [node.path, "/proc/thread-self/ns/net", "/proc/self/ns/net"]) {
      for (const ifName of ["eth1", "eth7"]) {
        const pod = { ...at(0), netns, ifName };
        const calls: [string, () => unknown][] = [
          ["attach", () => attachPod(CFG, pod)],
          ["check", () => checkPod(CFG, pod)],
          ["detach", () => detachPod(CFG, pod)],
        ];
        for (const [verb, fn] of calls) {
          assert.throws(() => onNode(node, fn), (e: unknown) => {
            assert.ok(e instanceof DatapathInputError, `${verb} ${netns}: ${e}`);
            assert.match(e.message, /node's own network namespace/);
            return true;
          });
        }
      }
    }
    assert.deepEqual(await kernelState(node.name), before);
    assert.deepEqual(await kernelState(), machine);
  });
});

Deno.test("datapath: DEL never deletes a link with an ENI's MAC, in the pod or on the host", async () => {
  await withEniNode({ prefix: "vdg", eni: ENI1 }, async (node, [pod], at) => {
    const a = at(0);
    onNode(node, () => attachPod(CFG, a));
    // The pod's eth0 is now an ENI moved into the netns (a veth with ENI1's MAC here).
    await sh(["ip", "link", "del", "eth0"], { netns: pod.name });
    await sh(
      ["ip", "link", "add", "eth0", "address", ENI1.mac, "type", "veth", "peer", "name", "x0"],
      { netns: pod.name },
    );
    const skipped = onNode(node, () => detachPod({ ...CFG, eniMacs: [ENI1.mac] }, a));
    assert.deepEqual(skipped, [
      `pod: left eth0 alone: link eth0 has MAC ${ENI1.mac}, which is one of the node's ENIs`,
    ]);
    assert.equal((await ipJson(["link", "show", "eth0"], pod.name) as unknown[]).length, 1);
    assert.deepEqual(await rulesOf(node, a.address.ip), [], "the attachment's rules went");
    // On the host: the ENI's own link, renamed to the attachment's host veth name, stays.
    const hostVeth = hostVethName("vpc", a.containerId, a.ifName);
    await sh(["ip", "link", "set", "eth1", "down"], { netns: node.name });
    await sh(["ip", "link", "set", "eth1", "name", hostVeth], { netns: node.name });
    const untouched = await kernelState(node.name);
    const again = onNode(node, () => detachPod({ ...CFG, eniMacs: [ENI1.mac] }, a));
    assert.match(again.join("\n"), new RegExp(`host: left ${hostVeth} alone: .*ENIs`));
    assert.deepEqual(await kernelState(node.name), untouched);
  });
});

Deno.test("datapath: DEL naming another pod's address removes this pod's rules and keeps the other's", async () => {
  await withEniNode({ prefix: "vdg", eni: ENI1, pods: 2 }, async (node, _pods, at) => {
    const [a, b] = [at(0), at(1)];
    onNode(node, () => attachPod(CFG, a));
    onNode(node, () => attachPod(CFG, b));
    assert.deepEqual(await rulesOf(node, b.address.ip), [1000, 2000]);
    onNode(node, () => detachPod(CFG, { ...a, address: b.address }));
    assert.deepEqual(await rulesOf(node, a.address.ip), [], "pod A's rules 1000/2000 are gone");
    assert.deepEqual(await rulesOf(node, b.address.ip), [1000, 2000], "pod B's rules stay");
    assert.deepEqual(onNode(node, () => checkPod(CFG, b)), []);
  });
});

Deno.test("datapath: the pod MTU is bounded by the ENI's link, which keeps its own", async () => {
  for (const [eniMtu, cfgMtu, podMtu] of [[9001, 576, 576], [1500, 9001, 1500]]) {
    await withEniNode({ prefix: "vdg", eni: ENI1, eniMtu }, async (node, [pod], at) => {
      const a = at(0);
      const cfg = { ...CFG, mtu: cfgMtu };
      const res = onNode(node, () => attachPod(cfg, a));
      assert.equal(await mtuOf(node.name, "eth1"), eniMtu, "the ENI's MTU is unchanged");
      assert.equal(await mtuOf(pod.name, "eth0"), podMtu);
      assert.deepEqual(res.interfaces.map((i) => i.mtu), [podMtu, podMtu]);
      assert.deepEqual(onNode(node, () => checkPod(cfg, a)), []);
      onNode(node, () => detachPod(cfg, a));
      assert.equal(await mtuOf(node.name, "eth1"), eniMtu);
    });
  }
});
