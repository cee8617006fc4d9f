/**
 * vpcni as the IPAM plugin (`ipam.type: "vpcni"`) under the reference `ptp` plugin, driven
 * by cnitool: ptp execs vpcni from CNI_PATH, vpcni asks the daemon (here the stand-in from
 * tests/helpers/ipam_standin.ts) and ptp wires the address vpcni returned.
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { ipJson } from "../helpers/sh.ts";
import { startNodeStandin } from "../helpers/cni_standin_node.ts";
import { cnitool, makeNode, networkName, runVpcni, writeConflist } from "./harness.ts";

for (const version of ["1.1.0", "0.4.0"]) {
  Deno.test(`ptp + ipam vpcni (${version}): ADD, CHECK, DEL, GC through cnitool`, async () => {
    const node = await makeNode();
    const standin = startNodeStandin(node, {
      addresses: ["10.77.0.60", "10.77.0.61"],
    });
    try {
      const net = networkName(`ptp${version.replaceAll(".", "")}`);
      const conf = await writeConflist(node.dir, {
        cniVersion: version,
        name: net,
        plugins: [{
          type: "ptp",
          ipMasq: false,
          mtu: 1500,
          ipam: { type: "vpcni", daemonSocket: standin.socket },
        }],
      });
      const pod = await node.pod();
      const before = await kernelState(node.node.name);

      const add = await cnitool(node, conf, "add", net, pod);
      assert.equal(add.code, 0, `cnitool add: ${add.stdout} ${add.stderr}`);
      const result = JSON.parse(add.stdout) as {
        cniVersion: string;
        ips: { address: string; gateway: string }[];
      };
      assert.equal(result.cniVersion, version);
      assert.equal(result.ips[0].address, "10.77.0.60/24");
      assert.equal(result.ips[0].gateway, "10.77.0.1");
      const addrs = await ipJson<{ addr_info: { local: string }[] }[]>([
        "-4",
        "addr",
        "show",
        "dev",
        "eth0",
      ], pod.name);
      assert.equal(addrs[0].addr_info[0].local, "10.77.0.60", "ptp put vpcni's address on the pod");
      assert.equal(standin.reservations.size, 1);

      const check = await cnitool(node, conf, "check", net, pod);
      assert.equal(check.code, 0, `cnitool check: ${check.stdout} ${check.stderr}`);

      const del = await cnitool(node, conf, "del", net, pod);
      assert.equal(del.code, 0, `cnitool del: ${del.stdout} ${del.stderr}`);
      assert.equal(standin.reservations.size, 0, "DEL released the reservation");
      assert.deepEqual(await kernelState(node.node.name), before);

      if (version === "1.1.0") {
        // GC and STATUS straight through the IPAM role.
        const ipamConf = (extra: Record<string, unknown>) =>
          JSON.stringify({
            cniVersion: version,
            name: net,
            type: "ptp",
            ipam: { type: "vpcni", daemonSocket: standin.socket },
            ...extra,
          });
        const status = await runVpcni(node, { CNI_COMMAND: "STATUS" }, ipamConf({}));
        assert.equal(status.code, 0, status.stdout);
        const add2 = await cnitool(node, conf, "add", net, pod);
        assert.equal(add2.code, 0, add2.stdout + add2.stderr);
        const gc = await runVpcni(
          node,
          { CNI_COMMAND: "GC", CNI_PATH: node.bin.dir },
          ipamConf({ "cni.dev/valid-attachments": [] }),
        );
        assert.equal(gc.code, 0, gc.stdout);
        assert.equal(
          standin.reservations.size,
          0,
          "GC with no valid attachments released everything",
        );
        assert.equal((await cnitool(node, conf, "del", net, pod)).code, 0);
      }
    } finally {
      await standin.close();
      await node.cleanup();
    }
  });
}

Deno.test("IPAM role: the daemon being down is code 11 naming the socket", async () => {
  const node = await makeNode();
  try {
    const pod = await node.pod();
    const socket = `${node.dir}/absent.sock`;
    const r = await runVpcni(
      node,
      { CNI_COMMAND: "ADD", CNI_CONTAINERID: "c1", CNI_NETNS: pod.path, CNI_IFNAME: "eth0" },
      JSON.stringify({
        cniVersion: "1.0.0",
        name: "n",
        type: "ptp",
        ipam: { type: "vpcni", daemonSocket: socket },
      }),
    );
    assert.equal(r.code, 1);
    assert.equal(r.json?.code, 11);
    assert.match(String(r.json?.msg), new RegExp(socket.replaceAll("/", "\\/")));
  } finally {
    await node.cleanup();
  }
});
