/**
 * Kernel lane (ipvlan is absent on the host kernel): vpcni as the IPAM plugin of the
 * reference `ipvlan` plugin, and vpcni's own ipvlan datapaths, driven by cnitool with
 * addresses from the IPAM daemon stand-in (tests/helpers/ipam_standin.ts).
 *
 * Run: `deno task test:kernel tests/kernel/cni_ipam_ipvlan.kernel.ts`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { startIpamStandin } from "../helpers/ipam_standin.ts";
import { ipJson } from "../helpers/sh.ts";
import { cnitool, makeNode, networkName, NODE_ENI_MAC, writeConflist } from "../cni/harness.ts";

interface IpLinkDetail {
  ifname: string;
  linkinfo?: { info_kind?: string; info_data?: { mode?: string } };
  addr_info?: { local: string; prefixlen: number }[];
}

async function podLink(netns: string): Promise<IpLinkDetail> {
  const [link] = await ipJson<IpLinkDetail[]>(["-4", "-d", "addr", "show", "dev", "eth0"], netns);
  return link;
}

Deno.test("kernel lane: reference ipvlan + ipam vpcni: ADD, CHECK, DEL through cnitool", async () => {
  const node = await makeNode();
  const socket = `${node.dir}/ipam.sock`;
  const standin = startIpamStandin({
    nodeNetns: node.node.path,
    socket,
    addresses: ["10.77.0.70"],
    eniMac: NODE_ENI_MAC,
  });
  try {
    const net = networkName("ipvlanipam");
    const conf = await writeConflist(node.dir, {
      cniVersion: "1.1.0",
      name: net,
      plugins: [{
        type: "ipvlan",
        master: "eth0",
        mode: "l2",
        ipam: { type: "vpcni", daemonSocket: socket },
      }],
    });
    const pod = await node.pod();
    const before = await kernelState(node.node.name);

    const add = await cnitool(node, conf, "add", net, pod);
    assert.equal(add.code, 0, `cnitool add: ${add.stdout} ${add.stderr}`);
    const link = await podLink(pod.name);
    assert.equal(link.linkinfo?.info_kind, "ipvlan");
    assert.deepEqual(link.addr_info?.map((a) => `${a.local}/${a.prefixlen}`), ["10.77.0.70/24"]);
    assert.equal(standin.reservations.size, 1);

    const check = await cnitool(node, conf, "check", net, pod);
    assert.equal(check.code, 0, `cnitool check: ${check.stdout} ${check.stderr}`);

    const del = await cnitool(node, conf, "del", net, pod);
    assert.equal(del.code, 0, `cnitool del: ${del.stdout} ${del.stderr}`);
    assert.equal(standin.reservations.size, 0);
    assert.deepEqual(await kernelState(node.node.name), before);
  } finally {
    await standin.close();
    await node.cleanup();
  }
});

for (const datapath of ["ipvlan-l2", "ipvlan-l3s"] as const) {
  Deno.test(`kernel lane: vpcni ${datapath} with the daemon: ADD, CHECK, DEL leave nothing`, async () => {
    const node = await makeNode();
    const socket = `${node.dir}/ipam.sock`;
    const standin = startIpamStandin({
      nodeNetns: node.node.path,
      socket,
      addresses: ["10.77.0.80"],
      eniMac: NODE_ENI_MAC,
      nodeIps: ["10.77.0.10"],
    });
    try {
      const net = networkName(datapath.replace("-", ""));
      const conf = await writeConflist(node.dir, {
        cniVersion: "1.1.0",
        name: net,
        plugins: [{
          type: "vpcni",
          datapath,
          mtu: 1500,
          serviceCidrs: ["172.20.0.0/16"],
          daemonSocket: socket,
        }],
      });
      const pod = await node.pod();
      const before = await kernelState(node.node.name);

      const add = await cnitool(node, conf, "add", net, pod);
      assert.equal(add.code, 0, `cnitool add: ${add.stdout} ${add.stderr}`);
      const result = JSON.parse(add.stdout) as { ips: { address: string }[] };
      assert.match(result.ips[0].address, /^10\.77\.0\.80\//);
      const link = await podLink(pod.name);
      assert.equal(link.linkinfo?.info_kind, "ipvlan");
      assert.equal(link.linkinfo?.info_data?.mode, datapath === "ipvlan-l2" ? "l2" : "l3s");

      const check = await cnitool(node, conf, "check", net, pod);
      assert.equal(check.code, 0, `cnitool check: ${check.stdout} ${check.stderr}`);

      const del = await cnitool(node, conf, "del", net, pod);
      assert.equal(del.code, 0, `cnitool del: ${del.stdout} ${del.stderr}`);
      assert.equal(standin.reservations.size, 0);
      assert.deepEqual(await kernelState(node.node.name), before, "DEL leaves the node as it was");
      // The ipvlan slave carries its parent ENI's MAC, yet it is the pod's: DEL removes it.
      const podLinks = await ipJson<{ ifname: string }[]>(["link", "show"], pod.name);
      assert.deepEqual(podLinks.map((l) => l.ifname), ["lo"], "DEL removes the pod's interface");
    } finally {
      await standin.close();
      await node.cleanup();
    }
  });
}
