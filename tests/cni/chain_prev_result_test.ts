/**
 * vpcni after another plugin in a chain, through cnitool: the reference `loopback` runs
 * first and its result (interface `lo`, 127.0.0.1/8, ::1/128) must come out of vpcni's ADD
 * with vpcni's own interfaces and address appended, `ips[].interface` still naming the
 * right interface; CHECK and DEL then work on the merged result libcni cached.
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import {
  cnitool,
  hostLocalIpam,
  hostLocalReserved,
  makeNode,
  networkName,
  writeConflist,
} from "./harness.ts";

interface AddResult {
  cniVersion: string;
  interfaces: { name: string; sandbox?: string }[];
  ips: { address: string; interface?: number; version?: string }[];
  routes?: { dst: string; gw?: string }[];
  dns?: { nameservers?: string[] };
}

for (const version of ["1.1.0", "1.0.0", "0.4.0", "0.3.1"]) {
  Deno.test(`cnitool ${version}: loopback then vpcni, the result carries both`, async () => {
    const node = await makeNode();
    try {
      const net = networkName(`lo${version.replaceAll(".", "")}`);
      const conf = await writeConflist(node.dir, {
        cniVersion: version,
        name: net,
        plugins: [
          { type: "loopback" },
          {
            type: "vpcni",
            datapath: "veth",
            mtu: 1500,
            ipam: hostLocalIpam(node.dir),
            dns: { nameservers: ["10.88.0.2"] },
          },
        ],
      });
      const pod = await node.pod();
      const before = await kernelState(node.node.name);
      const add = await cnitool(node, conf, "add", net, pod);
      assert.equal(add.code, 0, add.stdout + add.stderr);
      const r = JSON.parse(add.stdout) as AddResult;
      assert.equal(r.cniVersion, version);
      assert.deepEqual(r.interfaces.map((i) => i.name).slice(0, 1), ["lo"]);
      assert.equal(r.interfaces.length, 3, "lo, then vpcni's host veth and eth0");
      const eth0 = r.interfaces.findIndex((i) => i.name === "eth0" && i.sandbox === pod.path);
      assert.equal(eth0, 2);
      const lo = r.ips.find((ip) => ip.address === "127.0.0.1/8");
      assert.ok(lo, `loopback's address was dropped: ${add.stdout}`);
      assert.equal(lo.interface, 0);
      const own = r.ips.find((ip) => ip.address.startsWith("10.88.0."));
      assert.ok(own, add.stdout);
      assert.equal(own.interface, eth0, "vpcni's address still names its eth0");
      assert.deepEqual(r.dns?.nameservers, ["10.88.0.2"]);
      assert.ok(r.routes?.some((x) => x.dst === "0.0.0.0/0"));

      if (version !== "0.3.1") { // CHECK exists from 0.4.0
        const check = await cnitool(node, conf, "check", net, pod);
        assert.equal(check.code, 0, check.stdout + check.stderr);
      }
      const del = await cnitool(node, conf, "del", net, pod);
      assert.equal(del.code, 0, del.stdout + del.stderr);
      assert.deepEqual(await hostLocalReserved(node.dir, net), []);
      assert.deepEqual(await kernelState(node.node.name), before);
    } finally {
      await node.cleanup();
    }
  });
}
