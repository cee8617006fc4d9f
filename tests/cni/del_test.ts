/**
 * DEL is idempotent and releases what it can: a vanished netns, an unknown container, no
 * prevResult. And logs go to the configured log file, never to stdout.
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { startNodeStandin, vethDaemonConf } from "../helpers/cni_standin_node.ts";
import { deleteNetns } from "../helpers/netns.ts";
import { makeNode, podEnv, runVpcni } from "./harness.ts";

Deno.test("DEL after the pod netns vanished: success, reservation and host objects gone", async () => {
  const node = await makeNode();
  const logFile = `${node.dir}/vpcni.log`;
  const standin = startNodeStandin(node, { addresses: ["10.77.0.90"] });
  try {
    const conf = JSON.stringify(
      vethDaemonConf("vcn-del", standin.socket, {
        cniVersion: "1.0.0",
        logFile,
        logLevel: "debug",
      }),
    );
    const pod = await node.pod();
    const env = (cmd: string) => podEnv(cmd, "vcn-del-1", pod.path);
    const before = await kernelState(node.node.name);
    const add = await runVpcni(node, env("ADD"), conf);
    assert.equal(add.code, 0, add.stdout + add.stderr);
    assert.equal(add.stderr, "", "with logFile set, nothing goes to stderr");
    assert.notDeepEqual(await kernelState(node.node.name), before);

    await deleteNetns(pod.name);
    // No prevResult: the plugin asks the daemon which address to clean up after.
    const del = await runVpcni(node, env("DEL"), conf);
    assert.equal(del.code, 0, del.stdout + del.stderr);
    assert.equal(del.stdout, "", "DEL prints nothing on success");
    assert.equal(standin.reservations.size, 0);
    assert.deepEqual(await kernelState(node.node.name), before, "no host veth, route or rule left");

    const again = await runVpcni(node, env("DEL"), conf);
    assert.equal(again.code, 0, again.stdout);
    const unknown = await runVpcni(node, { ...env("DEL"), CNI_CONTAINERID: "never-added" }, conf);
    assert.equal(unknown.code, 0, unknown.stdout);

    const log = (await Deno.readTextFile(logFile)).trim().split("\n").map((l) => JSON.parse(l));
    assert.ok(log.some((l) => l.msg === "added" && l.ip === "10.77.0.90" && l.cmd === "ADD"));
    assert.ok(log.some((l) => l.msg === "deleted" && l.containerId === "vcn-del-1"));
  } finally {
    await standin.close();
    await node.cleanup();
  }
});

Deno.test("daemon down: DEL removes the pod's objects and succeeds; ADD and CHECK say code 11 naming the socket", async () => {
  const node = await makeNode();
  const standin = startNodeStandin(node, { addresses: ["10.77.0.91"] });
  const socket = standin.socket;
  let closed = false;
  try {
    const conf = JSON.stringify(vethDaemonConf("vcn-del2", socket));
    const pod = await node.pod();
    const env = (cmd: string) => podEnv(cmd, "vcn-del-2", pod.path);
    const before = await kernelState(node.node.name);
    const add = await runVpcni(node, env("ADD"), conf);
    assert.equal(add.code, 0, add.stdout + add.stderr);
    await standin.close();
    closed = true;
    const prevConf = JSON.stringify({ ...JSON.parse(conf), prevResult: add.json });
    const check = await runVpcni(node, env("CHECK"), prevConf);
    assert.equal(check.code, 1);
    assert.equal(check.json?.code, 11, check.stdout);
    assert.match(String(check.json?.msg), new RegExp(`IPAM daemon unreachable at ${socket}`));
    // The plugin removes the pod's host objects itself; the daemon's start-up reconcile frees
    // the address once the runtime has removed the pod's netns.
    const del = await runVpcni(node, env("DEL"), prevConf);
    assert.equal(del.code, 0, del.stdout + del.stderr);
    assert.equal(del.stdout, "");
    assert.deepEqual(
      await kernelState(node.node.name),
      before,
      "the datapath is gone",
    );
    const other = await node.pod();
    const add2 = await runVpcni(
      node,
      { ...env("ADD"), CNI_CONTAINERID: "vcn-del-3", CNI_NETNS: other.path },
      conf,
    );
    assert.equal(add2.json?.code, 11, add2.stdout);
    assert.match(String(add2.json?.msg), new RegExp(`IPAM daemon unreachable at ${socket}`));
    assert.deepEqual(await kernelState(node.node.name), before, "a refused ADD wires nothing");
  } finally {
    if (!closed) await standin.close();
    await node.cleanup();
  }
});

Deno.test("an IPAM result without a gateway: veth needs none, ipvlan is told to set one", async () => {
  const node = await makeNode();
  try {
    // Stands in for a third-party IPAM plugin that omits the gateway (host-local always sets
    // one, so it cannot show this case).
    await Deno.writeTextFile(
      `${node.bin.dir}/vcn-nogw-ipam`,
      '#!/bin/sh\nif [ "$CNI_COMMAND" = ADD ]; then echo \'{"cniVersion":"1.1.0","ips":[{"address":"10.99.0.7/24"}]}\'; fi\n',
      { mode: 0o755 },
    );
    const pod = await node.pod();
    const env = (cmd: string) => podEnv(cmd, "vcn-nogw", pod.path, { CNI_PATH: node.bin.dir });
    const conf = (datapath: string) =>
      JSON.stringify({
        cniVersion: "1.1.0",
        name: "vcn-nogw",
        type: "vpcni",
        datapath,
        mtu: 1500,
        ipam: { type: "vcn-nogw-ipam" },
      });
    const before = await kernelState(node.node.name);
    const refused = await runVpcni(node, env("ADD"), conf("ipvlan-l2"));
    assert.equal(refused.json?.code, 7, refused.stdout);
    assert.match(String(refused.json?.msg), /returned no gateway/);

    const add = await runVpcni(node, env("ADD"), conf("veth"));
    assert.equal(add.code, 0, add.stdout + add.stderr);
    const ips = (add.json as { ips: { address: string }[] }).ips;
    assert.equal(ips[0].address, "10.99.0.7/32");
    const withPrev = JSON.stringify({ ...JSON.parse(conf("veth")), prevResult: add.json });
    const del = await runVpcni(node, env("DEL"), withPrev);
    assert.equal(del.code, 0, del.stdout + del.stderr);
    assert.deepEqual(await kernelState(node.node.name), before);
  } finally {
    await node.cleanup();
  }
});
