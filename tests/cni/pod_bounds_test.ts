/**
 * What a pod's configuration and its IPAM result may not do to the node, through the plugin
 * binary in a test node netns: `mtu` never changes the ENI's link (the pod gets at most its
 * MTU), and an address no pod may have is refused with nothing wired and the reservation
 * released.
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { startNodeStandin, vethDaemonConf } from "../helpers/cni_standin_node.ts";
import { ipJson } from "../helpers/sh.ts";
import { assertNoStack, makeNode, podEnv, runVpcni } from "./harness.ts";

async function linkMtu(netns: string, name: string): Promise<number> {
  return (await ipJson<{ mtu: number }[]>(["link", "show", name], netns))[0].mtu;
}

Deno.test("mtu in the conflist never changes the ENI's link; the pod gets at most the ENI's MTU", async () => {
  const node = await makeNode();
  // A secondary ENI: the old host setup set its link to exactly the conflist's mtu.
  const standin = startNodeStandin(node, {
    addresses: ["10.77.0.95", "10.77.0.96"],
    deviceIndex: 1,
  });
  try {
    const eniMtu = await linkMtu(node.node.name, "eth0");
    assert.equal(eniMtu, 1500);
    for (const [mtu, podMtu] of [[576, 576], [9001, 1500]]) {
      const conf = vethDaemonConf("vcn-mtu", standin.socket, { mtu });
      const pod = await node.pod();
      const id = `mtu-${mtu}`;
      const add = await runVpcni(node, podEnv("ADD", id, pod.path), JSON.stringify(conf));
      assert.equal(add.code, 0, add.stdout + add.stderr);
      assert.equal(await linkMtu(node.node.name, "eth0"), eniMtu, `mtu ${mtu} changed the ENI`);
      assert.equal(await linkMtu(pod.name, "eth0"), podMtu);
      const ifs = (add.json as { interfaces: { mtu?: number }[] }).interfaces;
      assert.deepEqual(ifs.map((i) => i.mtu), [podMtu, podMtu], "the result says the real MTU");
      const prev = JSON.stringify({ ...conf, prevResult: add.json });
      const check = await runVpcni(node, podEnv("CHECK", id, pod.path), prev);
      assert.equal(check.code, 0, check.stdout + check.stderr);
      const del = await runVpcni(node, podEnv("DEL", id, pod.path), prev);
      assert.equal(del.code, 0, del.stdout + del.stderr);
      assert.equal(await linkMtu(node.node.name, "eth0"), eniMtu);
    }
  } finally {
    await standin.close();
    await node.cleanup();
  }
});

Deno.test("an IPAM result giving an address no pod may have is refused (105), nothing wired, released", async () => {
  const node = await makeNode();
  try {
    const pod = await node.pod();
    const marker = `${node.dir}/bad-ipam.calls`;
    // Stands in for a misconfigured IPAM plugin that hands out one given address; it
    // records every verb, so the test sees the DEL that releases the reservation.
    await Deno.writeTextFile(
      `${node.bin.dir}/vcn-bad-ipam`,
      `#!/bin/sh\necho "$CNI_COMMAND" >> ${marker}\n` +
        'if [ "$CNI_COMMAND" = ADD ]; then printf \'{"cniVersion":"1.1.0","ips":[{"address":"%s"}]}\' "$VCN_ADDR"; fi\n',
      { mode: 0o755 },
    );
    const conf = (type: string) =>
      JSON.stringify({
        cniVersion: "1.1.0",
        name: "vcn-badaddr",
        type: "vpcni",
        datapath: "veth",
        mtu: 1500,
        ipam: { type },
      });
    const nodeBefore = await kernelState(node.node.name);
    const podBefore = await kernelState(pod.name);
    const cases: [string, RegExp][] = [
      ["127.0.0.1/8", /loopback/],
      ["127.5.5.5/32", /loopback/],
      ["0.0.0.0/0", /this network/],
      ["0.1.2.3/8", /this network/],
      ["169.254.3.4/16", /link-local/],
      ["224.0.0.5/24", /multicast/],
      ["239.255.255.250/32", /multicast/],
      ["240.1.2.3/24", /reserved/],
      ["255.255.255.255/32", /limited broadcast/],
      ["10.99.0.255/24", /broadcast address of 10\.99\.0\.0\/24/],
      ["10.99.0.0/24", /network address of 10\.99\.0\.0\/24/],
      ["10.77.0.10/24", /node's own/],
    ];
    for (const [addr, why] of cases) {
      await Deno.writeTextFile(marker, "");
      const r = await runVpcni(
        node,
        podEnv("ADD", "bad", pod.path, { CNI_PATH: node.bin.dir, VCN_ADDR: addr }),
        conf("vcn-bad-ipam"),
      );
      assert.equal(r.code, 1, `${addr}: ${r.stdout}`);
      assert.equal(r.json?.code, 105, `${addr}: ${r.stdout}`);
      assert.match(String(r.json?.msg), why, addr);
      assertNoStack(r);
      assert.deepEqual((await Deno.readTextFile(marker)).trim().split("\n"), ["ADD", "DEL"]);
      assert.deepEqual(await kernelState(node.node.name), nodeBefore, `${addr} changed the node`);
      assert.deepEqual(await kernelState(pod.name), podBefore, `${addr} changed the pod`);
    }

    // The reference loopback plugin named as the IPAM plugin: it answers 127.0.0.1/8.
    const lo = await runVpcni(
      node,
      podEnv("ADD", "lo", pod.path, { CNI_PATH: node.bin.dir }),
      conf("loopback"),
    );
    assert.equal(lo.json?.code, 105, lo.stdout);
    assert.match(String(lo.json?.msg), /127\.0\.0\.1 is a loopback address/);
    assert.deepEqual(await kernelState(node.node.name), nodeBefore);
  } finally {
    await node.cleanup();
  }
});
