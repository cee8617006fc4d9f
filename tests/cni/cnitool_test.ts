/**
 * vpcni driven by cnitool (libcni) as the first plugin of a chain with the reference
 * portmap, tuning and bandwidth plugins: the chained plugins parse vpcni's result in every
 * CNI version, and ADD, CHECK, STATUS, GC and DEL go through libcni end to end.
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { ipJson, sh } from "../helpers/sh.ts";
import { startNodeStandin, vethDaemonConf } from "../helpers/cni_standin_node.ts";
import {
  cnitool,
  hostLocalIpam,
  hostLocalReserved,
  makeNode,
  networkName,
  podEnv,
  runVpcni,
  writeConflist,
} from "./harness.ts";
import type { TestNetns } from "../helpers/netns.ts";

interface AddResult {
  cniVersion: string;
  interfaces: { name: string; mac: string; sandbox?: string; mtu?: number }[];
  ips: { address: string; gateway?: string; interface?: number; version?: string }[];
  routes: { dst: string; gw?: string }[];
}

function chain(name: string, cniVersion: string, dir: string): Record<string, unknown> {
  return {
    cniVersion,
    name,
    plugins: [
      { type: "vpcni", datapath: "veth", mtu: 1500, ipam: hostLocalIpam(dir) },
      { type: "portmap", backend: "nftables", capabilities: { portMappings: true } },
      { type: "tuning", sysctl: { "net.ipv4.conf.eth0.rp_filter": "0" } },
      { type: "bandwidth", ingressRate: 10_000_000, ingressBurst: 100_000 },
    ],
  };
}

async function podAddrs(pod: TestNetns): Promise<string[]> {
  const links = await ipJson<
    { ifname: string; addr_info: { family: string; local: string; prefixlen: number }[] }[]
  >(
    ["-4", "addr", "show", "dev", "eth0"],
    pod.name,
  );
  return links.flatMap((l) => l.addr_info.map((a) => `${a.local}/${a.prefixlen}`));
}

for (const version of ["1.1.0", "1.0.0", "0.4.0", "0.3.1"]) {
  Deno.test(`cnitool ${version}: vpcni(veth, host-local) + portmap + tuning + bandwidth`, async () => {
    const node = await makeNode();
    try {
      const net = networkName(version.replaceAll(".", ""));
      const conf = await writeConflist(node.dir, chain(net, version, node.dir));
      const pod = await node.pod();
      const before = await kernelState(node.node.name);
      const capArgs = JSON.stringify({
        portMappings: [{ hostPort: 18080, containerPort: 80, protocol: "tcp" }],
      });

      const add = await cnitool(node, conf, "add", net, pod, { CAP_ARGS: capArgs });
      assert.equal(add.code, 0, `cnitool add: ${add.stdout} ${add.stderr}`);
      const result = JSON.parse(add.stdout) as AddResult;
      assert.equal(result.cniVersion, version);
      const [hostIf, podIf] = result.interfaces;
      assert.equal(podIf.name, "eth0");
      assert.equal(podIf.sandbox, pod.path);
      assert.equal(hostIf.sandbox, undefined);
      assert.equal(result.ips.length, 1);
      assert.match(result.ips[0].address, /^10\.88\.0\.\d+\/32$/);
      assert.equal(result.ips[0].interface, 1);
      assert.equal(result.ips[0].version, version.startsWith("0.") ? "4" : undefined);
      assert.equal(podIf.mtu, version === "1.1.0" ? 1500 : undefined);

      // The pod has the address, the chained plugins did their part on vpcni's objects.
      assert.deepEqual(await podAddrs(pod), [result.ips[0].address]);
      assert.equal(
        (await sh(["sysctl", "-n", "net.ipv4.conf.eth0.rp_filter"], { netns: pod.name })).trim(),
        "0",
      );
      const qdiscs = await sh(["tc", "-j", "qdisc", "show", "dev", hostIf.name], {
        netns: node.node.name,
      });
      assert.match(qdiscs, /"kind":"tbf"/, "bandwidth shapes the host veth vpcni named");
      const nft = await sh(["nft", "list", "ruleset"], { netns: node.node.name });
      assert.match(nft, /18080/, "portmap installed the host port for vpcni's address");
      assert.ok(nft.includes(result.ips[0].address.split("/")[0]));
      assert.deepEqual(await hostLocalReserved(node.dir, net), [
        result.ips[0].address.split("/")[0],
      ]);

      if (version !== "0.3.1") {
        const check = await cnitool(node, conf, "check", net, pod, { CAP_ARGS: capArgs });
        assert.equal(check.code, 0, `cnitool check: ${check.stdout} ${check.stderr}`);
        // Break one object vpcni made; CHECK must notice and name it.
        await sh(["ip", "route", "del", "default"], { netns: pod.name });
        const broken = await cnitool(node, conf, "check", net, pod, { CAP_ARGS: capArgs });
        assert.notEqual(broken.code, 0, "CHECK must fail once the default route is gone");
        assert.match(broken.stdout + broken.stderr, /101|default/);
      }
      if (version === "1.1.0") {
        const status = await cnitool(node, conf, "status", net, pod);
        assert.equal(status.code, 0, `cnitool status: ${status.stdout} ${status.stderr}`);
      }

      const del = await cnitool(node, conf, "del", net, pod, { CAP_ARGS: capArgs });
      assert.equal(del.code, 0, `cnitool del: ${del.stdout} ${del.stderr}`);
      assert.deepEqual(await hostLocalReserved(node.dir, net), []);
      assert.deepEqual(await kernelState(node.node.name), before, "DEL leaves the node as it was");
      const again = await cnitool(node, conf, "del", net, pod, { CAP_ARGS: capArgs });
      assert.equal(again.code, 0, `second DEL must succeed: ${again.stdout} ${again.stderr}`);
    } finally {
      await node.cleanup();
    }
  });
}

Deno.test("cnitool gc: libcni DELs its cached attachments, vpcni refuses a GC without the list", async () => {
  const node = await makeNode();
  try {
    const net = networkName("gc");
    const conf = await writeConflist(node.dir, chain(net, "1.1.0", node.dir));
    const pod = await node.pod();
    const before = await kernelState(node.node.name);
    const add = await cnitool(node, conf, "add", net, pod);
    assert.equal(add.code, 0, add.stdout + add.stderr);
    assert.equal((await hostLocalReserved(node.dir, net)).length, 1);
    // cnitool passes no GC arguments at all: libcni DELs every attachment it has cached
    // (which tears this pod down), then sends GC without cni.dev/valid-attachments, which
    // vpcni refuses rather than read as "none valid".
    const gc = await cnitool(node, conf, "gc", net, pod);
    assert.notEqual(gc.code, 0, gc.stdout + gc.stderr);
    assert.match(gc.stdout + gc.stderr, /GC needs cni\.dev\/valid-attachments/);
    assert.deepEqual(await hostLocalReserved(node.dir, net), []);
    assert.deepEqual(await kernelState(node.node.name), before);
  } finally {
    await node.cleanup();
  }
});

Deno.test("cnitool with the IPAM daemon: annotations, CNI_ARGS, CHECK against the reservation, GC", async () => {
  const node = await makeNode();
  const standin = startNodeStandin(node, {
    addresses: ["10.77.0.50", "10.77.0.51", "10.77.0.52"],
  });
  try {
    const net = networkName("daemon");
    const conf = await writeConflist(node.dir, {
      cniVersion: "1.1.0",
      name: net,
      plugins: [
        {
          type: "vpcni",
          datapath: "veth",
          mtu: 1500,
          daemonSocket: standin.socket,
          capabilities: { "io.kubernetes.cri.pod-annotations": true },
        },
        { type: "tuning", sysctl: { "net.ipv4.conf.eth0.rp_filter": "0" } },
      ],
    });
    const pod = await node.pod();
    const before = await kernelState(node.node.name);
    const env = {
      CAP_ARGS: JSON.stringify({ "io.kubernetes.cri.pod-annotations": { "vpcni.io/pool": "db" } }),
      CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=db-0;K8S_POD_UID=u-42",
    };
    const add = await cnitool(node, conf, "add", net, pod, env);
    assert.equal(add.code, 0, add.stdout + add.stderr);
    const result = JSON.parse(add.stdout) as AddResult;
    assert.equal(result.ips[0].address, "10.77.0.50/32");
    const addReq = standin.requests.find((r) => r.op === "add");
    assert.ok(addReq && addReq.op === "add");
    assert.deepEqual(addReq.annotations, { "vpcni.io/pool": "db" });
    assert.equal(addReq.podNamespace, "shop");
    assert.equal(addReq.podName, "db-0");
    assert.equal(addReq.podUid, "u-42");
    assert.equal(addReq.netns, pod.path);

    const check = await cnitool(node, conf, "check", net, pod, env);
    assert.equal(check.code, 0, `cnitool check: ${check.stdout} ${check.stderr}`);
    const status = await cnitool(node, conf, "status", net, pod);
    assert.equal(status.code, 0, `cnitool status: ${status.stdout} ${status.stderr}`);
    // The daemon now says another address is reserved: CHECK must report the mismatch.
    const [key, held] = [...standin.reservations][0];
    standin.reservations.set(key, { ...held, ip: "10.77.0.99" });
    const mismatch = await cnitool(node, conf, "check", net, pod, env);
    assert.notEqual(mismatch.code, 0);
    assert.match(mismatch.stdout + mismatch.stderr, /10\.77\.0\.99/);
    standin.reservations.set(key, held);

    const del = await cnitool(node, conf, "del", net, pod, env);
    assert.equal(del.code, 0, del.stdout + del.stderr);
    assert.equal(standin.reservations.size, 0);
    assert.deepEqual(await kernelState(node.node.name), before);

    // GC keeps the attachments the runtime lists and releases the rest, host objects and
    // all: here the runtime lost "stale" without a DEL (its veth, route and rules remain).
    const netConf = vethDaemonConf(net, standin.socket);
    const pods: Record<string, TestNetns> = {};
    for (const id of ["keep", "stale"]) {
      pods[id] = await node.pod();
      const r = await runVpcni(
        node,
        podEnv("ADD", id, pods[id].path, { CNI_PATH: node.bin.dir }),
        JSON.stringify(netConf),
      );
      assert.equal(r.code, 0, r.stdout + r.stderr);
    }
    const ipOf = (id: string) => standin.reservations.get(`${net}/${id}/eth0`)!.ip;
    const [keepIp, staleIp] = [ipOf("keep"), ipOf("stale")];
    const hostObjects = async () => {
      const rules = await ipJson(["-n", node.node.name, "-4", "rule", "show"]) as {
        src?: string;
        dst?: string;
      }[];
      const routes = await ipJson(["-n", node.node.name, "-4", "route", "show"]) as {
        dst: string;
      }[];
      return (ip: string) => ({
        rules: rules.filter((r) => r.src === ip || r.dst === ip).length,
        route: routes.some((r) => r.dst === ip),
      });
    };
    const beforeGc = await hostObjects();
    assert.ok(beforeGc(staleIp).rules >= 1 && beforeGc(staleIp).route, "stale has host objects");
    const gc = await runVpcni(
      node,
      { CNI_COMMAND: "GC", CNI_PATH: node.bin.dir },
      JSON.stringify({
        ...netConf,
        "cni.dev/valid-attachments": [{ containerID: "keep", ifname: "eth0" }],
      }),
    );
    assert.equal(gc.code, 0, gc.stdout + gc.stderr);
    assert.equal(gc.stdout, "", "GC prints nothing on success");
    assert.deepEqual([...standin.reservations.keys()], [`${net}/keep/eth0`]);
    const afterGc = await hostObjects();
    assert.deepEqual(afterGc(staleIp), { rules: 0, route: false }, "stale's host objects went");
    assert.deepEqual(afterGc(keepIp), beforeGc(keepIp), "keep's stayed");
  } finally {
    await standin.close();
    await node.cleanup();
  }
});
