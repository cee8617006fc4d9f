/**
 * DEL is idempotent and releases what it can: a vanished netns, an unknown container, no
 * prevResult. And logs go to the configured log file, never to stdout.
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { startIpamStandin } from "../helpers/ipam_standin.ts";
import { deleteNetns } from "../helpers/netns.ts";
import { makeNode, runVpcni } from "./harness.ts";

Deno.test("DEL after the pod netns vanished: success, reservation and host objects gone", async () => {
  const node = await makeNode();
  const socket = `${node.dir}/ipam.sock`;
  const logFile = `${node.dir}/vpcni.log`;
  const standin = startIpamStandin({ socket, addresses: ["10.77.0.90"] });
  try {
    const conf = JSON.stringify({
      cniVersion: "1.0.0",
      name: "vcn-del",
      type: "vpcni",
      datapath: "veth",
      mtu: 1500,
      daemonSocket: socket,
      logFile,
      logLevel: "debug",
    });
    const pod = await node.pod();
    const env = (cmd: string) => ({
      CNI_COMMAND: cmd,
      CNI_CONTAINERID: "vcn-del-1",
      CNI_NETNS: pod.path,
      CNI_IFNAME: "eth0",
    });
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

Deno.test("DEL with the daemon down: pod objects removed, code 11 so the runtime retries", async () => {
  const node = await makeNode();
  const socket = `${node.dir}/ipam.sock`;
  const standin = startIpamStandin({ socket, addresses: ["10.77.0.91"] });
  let closed = false;
  try {
    const conf = JSON.stringify({
      cniVersion: "1.1.0",
      name: "vcn-del2",
      type: "vpcni",
      datapath: "veth",
      mtu: 1500,
      daemonSocket: socket,
    });
    const pod = await node.pod();
    const env = (cmd: string) => ({
      CNI_COMMAND: cmd,
      CNI_CONTAINERID: "vcn-del-2",
      CNI_NETNS: pod.path,
      CNI_IFNAME: "eth0",
    });
    const before = await kernelState(node.node.name);
    const add = await runVpcni(node, env("ADD"), conf);
    assert.equal(add.code, 0, add.stdout + add.stderr);
    await standin.close();
    closed = true;
    const prevConf = JSON.stringify({ ...JSON.parse(conf), prevResult: add.json });
    const del = await runVpcni(node, env("DEL"), prevConf);
    assert.equal(del.json?.code, 11, del.stdout);
    assert.deepEqual(
      await kernelState(node.node.name),
      before,
      "the datapath is gone all the same",
    );
  } finally {
    if (!closed) await standin.close();
    await node.cleanup();
  }
});
