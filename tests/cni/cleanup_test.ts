/**
 * Cleanup under load: 50 pods ADDed at once (veth datapath, host-local addresses), then
 * all DELeted at once; the node must be exactly as before — no link, address, route, rule
 * or neighbour left — and host-local must hold no address.
 */
import assert from "node:assert/strict";
import { kernelState, linkNames } from "../helpers/cni_kernel_state.ts";
import { ipJson } from "../helpers/sh.ts";
import {
  cnitool,
  hostLocalIpam,
  hostLocalReserved,
  makeNode,
  networkName,
  writeConflist,
} from "./harness.ts";

const PODS = 50;

Deno.test(`cleanup: ${PODS} concurrent ADDs then DELs leave nothing behind`, async () => {
  const node = await makeNode();
  try {
    const net = networkName("fifty");
    const conf = await writeConflist(node.dir, {
      cniVersion: "1.1.0",
      name: net,
      plugins: [{
        type: "vpcni",
        datapath: "veth",
        mtu: 9001,
        ipam: hostLocalIpam(node.dir, "10.90.0.0/24"),
      }],
    });
    const pods = [];
    for (let i = 0; i < PODS; i++) pods.push(await node.pod());
    const before = await kernelState(node.node.name);

    const adds = await Promise.all(pods.map((p) => cnitool(node, conf, "add", net, p)));
    adds.forEach((r, i) => assert.equal(r.code, 0, `ADD ${i}: ${r.stdout} ${r.stderr}`));
    const ips = adds.map((r) =>
      (JSON.parse(r.stdout) as { ips: { address: string }[] }).ips[0].address
    );
    assert.equal(new Set(ips).size, PODS, "every pod got its own address");
    assert.equal((await hostLocalReserved(node.dir, net)).length, PODS);
    assert.equal((await linkNames(node.node.name)).filter((n) => n.startsWith("vpc")).length, PODS);
    const rules = await ipJson<{ dst?: string }[]>(["-4", "rule", "show"], node.node.name);
    assert.equal(
      rules.filter((r) => r.dst && ips.includes(`${r.dst}/32`)).length,
      PODS,
      "one to-pod rule each",
    );

    const dels = await Promise.all(pods.map((p) => cnitool(node, conf, "del", net, p)));
    dels.forEach((r, i) => assert.equal(r.code, 0, `DEL ${i}: ${r.stdout} ${r.stderr}`));
    assert.deepEqual(await hostLocalReserved(node.dir, net), []);
    assert.deepEqual(await kernelState(node.node.name), before, "the node is exactly as before");
    for (const p of pods) {
      assert.deepEqual(await linkNames(p.name), ["lo"], `${p.name} keeps only lo`);
    }
  } finally {
    await node.cleanup();
  }
});
