/**
 * Requests that must not harm the node or another pod, tried as a broken runtime would,
 * through the plugin binary in a test node netns: a DEL whose prevResult names another
 * pod, GC without its list of valid attachments, the node's own netns as CNI_NETNS, and links
 * that are not the datapath's. (The pod MTU and pod addresses are in pod_bounds_test.ts.)
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { startNodeStandin, vethDaemonConf } from "../helpers/cni_standin_node.ts";
import { ipJson, sh } from "../helpers/sh.ts";
import type { TestNetns } from "../helpers/netns.ts";
import { hostVethName } from "../../cni/datapath/naming.ts";
import {
  assertNoStack,
  makeNode,
  NODE_ENI_MAC,
  type PluginRun,
  podEnv,
  runVpcni,
  type TestNode,
} from "./harness.ts";

interface Rule {
  priority: number;
  src?: string;
  dst?: string;
  table?: string;
}

async function rulesOf(node: TestNode, ip: string): Promise<string[]> {
  const rules = await ipJson<Rule[]>(["-4", "rule", "show"], node.node.name);
  return rules.filter((r) => r.src === ip || r.dst === ip).map((r) =>
    `${r.priority} ${r.src ?? "all"} ${r.dst ?? "all"} ${r.table}`
  ).sort();
}

async function hasLink(netns: string, name: string): Promise<boolean> {
  const links = await ipJson<{ ifname: string }[]>(["link", "show"], netns);
  return links.some((l) => l.ifname === name);
}

Deno.test("DEL whose prevResult names another pod removes what the attachment holds, not the other pod", async () => {
  const node = await makeNode();
  // A secondary ENI: pods get `to ip lookup main` (1000) and `from ip lookup 101` (2000).
  const standin = startNodeStandin(node, {
    addresses: ["10.77.0.90", "10.77.0.91"],
    deviceIndex: 1,
  });
  try {
    const conf = vethDaemonConf("vcn-prev", standin.socket);
    const [podA, podB] = [await node.pod(), await node.pod()];
    const addA = await runVpcni(node, podEnv("ADD", "pod-a", podA.path), JSON.stringify(conf));
    assert.equal(addA.code, 0, addA.stdout + addA.stderr);
    const addB = await runVpcni(node, podEnv("ADD", "pod-b", podB.path), JSON.stringify(conf));
    assert.equal(addB.code, 0, addB.stdout + addB.stderr);
    const rulesB = await rulesOf(node, "10.77.0.91");
    assert.deepEqual(rulesB, ["1000 all 10.77.0.91 main", "2000 10.77.0.91 all 101"]);

    // DEL of pod A carrying pod B's result: pod A's objects go, pod B's stay.
    const del = await runVpcni(
      node,
      podEnv("DEL", "pod-a", podA.path),
      JSON.stringify({ ...conf, prevResult: addB.json }),
    );
    assert.equal(del.code, 0, del.stdout + del.stderr);
    assert.deepEqual(await rulesOf(node, "10.77.0.90"), [], "pod A's rules 1000/2000 are gone");
    assert.deepEqual(await rulesOf(node, "10.77.0.91"), rulesB, "pod B's rules stay");
    assert.equal(await hasLink(node.node.name, hostVethName("vpc", "pod-a", "eth0")), false);
    assert.equal(await hasLink(node.node.name, hostVethName("vpc", "pod-b", "eth0")), true);
    assert.deepEqual([...standin.reservations.values()].map((a) => a.ip), ["10.77.0.91"]);
    const checkB = await runVpcni(
      node,
      podEnv("CHECK", "pod-b", podB.path),
      JSON.stringify({ ...conf, prevResult: addB.json }),
    );
    assert.equal(checkB.code, 0, checkB.stdout + checkB.stderr);
  } finally {
    await standin.close();
    await node.cleanup();
  }
});

Deno.test("DEL with a delegated IPAM plugin and another pod's prevResult: the kernel says what to remove", async () => {
  const node = await makeNode();
  try {
    const conf = {
      cniVersion: "1.1.0",
      name: "vcn-prevhl",
      type: "vpcni",
      datapath: "veth",
      mtu: 1500,
      ipam: {
        type: "host-local",
        ranges: [[{ subnet: "10.88.0.0/24" }]],
        dataDir: `${node.dir}/host-local`,
      },
    };
    const path = { CNI_PATH: node.bin.dir };
    const [podA, podB] = [await node.pod(), await node.pod()];
    const addA = await runVpcni(node, podEnv("ADD", "hl-a", podA.path, path), JSON.stringify(conf));
    assert.equal(addA.code, 0, addA.stdout + addA.stderr);
    const addB = await runVpcni(node, podEnv("ADD", "hl-b", podB.path, path), JSON.stringify(conf));
    assert.equal(addB.code, 0, addB.stdout + addB.stderr);
    const ipOf = (r: PluginRun) =>
      (r.json as { ips: { address: string }[] }).ips[0].address.split("/")[0];
    const [ipA, ipB] = [ipOf(addA), ipOf(addB)];
    const rulesB = await rulesOf(node, ipB);
    assert.equal(rulesB.length, 1);
    const del = await runVpcni(
      node,
      podEnv("DEL", "hl-a", podA.path, path),
      JSON.stringify({ ...conf, prevResult: addB.json }),
    );
    assert.equal(del.code, 0, del.stdout + del.stderr);
    assert.deepEqual(await rulesOf(node, ipA), []);
    assert.deepEqual(await rulesOf(node, ipB), rulesB);
  } finally {
    await node.cleanup();
  }
});

Deno.test("GC without cni.dev/valid-attachments is refused (code 7) and changes nothing; with it, host objects go before the address", async () => {
  const node = await makeNode();
  const order: string[] = [];
  const standin = startNodeStandin(node, {
    addresses: ["10.77.0.70", "10.77.0.71"],
    async onRequest(req) {
      if (req.op !== "del") return;
      // When the address goes back, the attachment's host link must already be gone.
      const veth = hostVethName("vpc", req.containerId, req.ifName);
      order.push(
        `del ${req.containerId}: host link ${
          (await hasLink(node.node.name, veth)) ? "still there" : "gone"
        }`,
      );
    },
  });
  try {
    const net = vethDaemonConf("vcn-gc7", standin.socket);
    const pods: Record<string, TestNetns> = {};
    for (const id of ["live", "stale"]) {
      pods[id] = await node.pod();
      const r = await runVpcni(node, podEnv("ADD", id, pods[id].path), JSON.stringify(net));
      assert.equal(r.code, 0, r.stdout + r.stderr);
    }
    const before = await kernelState(node.node.name);
    const gcEnv = { CNI_COMMAND: "GC", CNI_PATH: node.bin.dir };
    const ipamRole = {
      cniVersion: "1.1.0",
      name: "vcn-gc7",
      type: "ptp",
      ipam: { type: "vpcni", daemonSocket: standin.socket },
    };
    for (const conf of [net, ipamRole]) {
      const gc = await runVpcni(node, gcEnv, JSON.stringify(conf));
      assert.equal(gc.code, 1, gc.stdout);
      assert.equal(gc.json?.code, 7, gc.stdout);
      assert.match(String(gc.json?.msg), /cni\.dev\/valid-attachments/);
      assertNoStack(gc);
      assert.equal(standin.reservations.size, 2, "no reservation was released");
      assert.deepEqual(await kernelState(node.node.name), before, "no host object was removed");
    }

    const gc = await runVpcni(
      node,
      gcEnv,
      JSON.stringify({
        ...net,
        "cni.dev/valid-attachments": [{ containerID: "live", ifname: "eth0" }],
      }),
    );
    assert.equal(gc.code, 0, gc.stdout + gc.stderr);
    assert.deepEqual([...standin.reservations.keys()], ["vcn-gc7/live/eth0"]);
    assert.deepEqual(order, ["del stale: host link gone"]);
    assert.equal(await hasLink(node.node.name, hostVethName("vpc", "live", "eth0")), true);

    // libcni's way of saying "none is valid" is null: everything goes.
    const none = await runVpcni(
      node,
      gcEnv,
      JSON.stringify({ ...net, "cni.dev/valid-attachments": null }),
    );
    assert.equal(none.code, 0, none.stdout + none.stderr);
    assert.equal(standin.reservations.size, 0);
  } finally {
    await standin.close();
    await node.cleanup();
  }
});

Deno.test("the node's own netns as CNI_NETNS: ADD, CHECK and DEL change nothing on the node", async () => {
  const node = await makeNode();
  const standin = startNodeStandin(node, {
    addresses: ["10.77.0.80", "10.77.0.81"],
  });
  try {
    const conf = vethDaemonConf("vcn-own", standin.socket);
    // A live pod, so a DEL that wrongly ran would have something to take from the node.
    const pod = await node.pod();
    const add = await runVpcni(node, podEnv("ADD", "own", pod.path), JSON.stringify(conf));
    assert.equal(add.code, 0, add.stdout + add.stderr);
    const before = await kernelState(node.node.name);
    const prev = JSON.stringify({ ...conf, prevResult: add.json });
    for (const netns of [node.node.path, "/proc/self/ns/net", "/proc/thread-self/ns/net"]) {
      for (
        const [cmd, id, ifName] of [
          ["DEL", "own", "eth0"],
          ["ADD", "own-2", "eth0"],
          ["ADD", "own-3", "eth9"],
          ["CHECK", "own", "eth0"],
        ]
      ) {
        const r = await runVpcni(
          node,
          { ...podEnv(cmd, id, netns), CNI_IFNAME: ifName },
          cmd === "ADD" ? JSON.stringify(conf) : prev,
        );
        assert.notEqual(r.code, 0, `${cmd} ${ifName} with CNI_NETNS=${netns} succeeded`);
        assert.ok([4, 7].includes(Number(r.json?.code)), r.stdout);
        assertNoStack(r);
        assert.deepEqual(
          await kernelState(node.node.name),
          before,
          `${cmd} with CNI_NETNS=${netns} changed the node`,
        );
      }
    }
    assert.deepEqual([...standin.reservations.keys()], ["vcn-own/own/eth0"]);
  } finally {
    await standin.close();
    await node.cleanup();
  }
});

Deno.test("DEL leaves alone a link that is not the datapath's: an ENI's MAC, or a kind it never makes", async () => {
  const node = await makeNode();
  const standin = startNodeStandin(node, {
    addresses: ["10.77.0.84", "10.77.0.85"],
  });
  try {
    const conf = JSON.stringify(vethDaemonConf("vcn-eni", standin.socket));
    // Pod 1: its eth0 replaced by a link with the ENI's MAC (an ENI moved into the netns).
    const pod1 = await node.pod();
    const add = await runVpcni(node, podEnv("ADD", "eni-in-pod", pod1.path), conf);
    assert.equal(add.code, 0, add.stdout + add.stderr);
    await sh(["ip", "link", "del", "eth0"], { netns: pod1.name });
    await sh(
      ["ip", "link", "add", "eth0", "address", NODE_ENI_MAC, "type", "veth", "peer", "name", "x0"],
      { netns: pod1.name },
    );
    const del = await runVpcni(node, podEnv("DEL", "eni-in-pod", pod1.path), conf);
    assert.equal(del.code, 0, del.stdout + del.stderr);
    assert.equal(await hasLink(pod1.name, "eth0"), true, "the ENI's link is left alone");
    assert.equal(standin.reservations.size, 0, "the attachment itself is gone");

    // Pod 2: its eth0 is a bridge, which the datapath never makes.
    const pod2 = await node.pod();
    await sh(["ip", "link", "add", "eth0", "type", "bridge"], { netns: pod2.name });
    const del2 = await runVpcni(node, podEnv("DEL", "never-added", pod2.path), conf);
    assert.equal(del2.code, 0, del2.stdout + del2.stderr);
    assert.equal(await hasLink(pod2.name, "eth0"), true, "the bridge is left alone");
  } finally {
    await standin.close();
    await node.cleanup();
  }
});
