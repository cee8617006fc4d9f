/**
 * A pod netns the daemon's mount namespace does not reach: the runtime mounted it where only
 * the runtime sees it (containerd's `netns_mounts_under_state_dir`, a daemon in a container
 * of its own). The daemon runs here in a mount namespace of its own (`unshare --mount
 * --propagation private`), as in its DaemonSet container, and the pod netns are bind-mounted
 * after it started, in the test's namespace only. Two layouts:
 * - the mount point is a file the daemon sees, without the mount (it sees an empty regular
 *   file: the issue's `… is a regular file, not a network namespace`);
 * - the directory is another one in the daemon's namespace (an empty tmpfs over it: nothing
 *   is there at all).
 * ADD, CHECK and DEL go through the real plugin, which hands the netns to the daemon over its
 * netns socket; the pod gets its interface, the result names the runtime's path, and the
 * reservation says the daemon cannot see the netns. Without the netns socket, the error names
 * the cause and the fix.
 *
 * The daemon is the stand-in's pools with the daemon's own CNI service, worker and netns
 * socket (tests/cni/standin_process.ts).
 */
import assert from "node:assert/strict";
import { run, sh } from "../helpers/sh.ts";
import { makeNode, NODE_ENI_MAC, podEnv, runVpcni, type TestNode } from "./harness.ts";

async function startHiddenDaemon(
  node: TestNode,
  socket: string,
  tmpfsOver: string,
  older = false,
) {
  const requestLog = `${node.dir}/requests.jsonl`;
  // The daemon's own mount namespace: private, so mounts made outside later never reach it,
  // with an empty tmpfs over `tmpfsOver` (a directory only the runtime's namespace has).
  const child = new Deno.Command("unshare", {
    args: [
      "--mount",
      "--propagation",
      "private",
      "sh",
      "-c",
      'mount -t tmpfs tmpfs "$0" && exec "$@"',
      tmpfsOver,
      Deno.execPath(),
      "run",
      "-A",
      "--no-check",
      new URL("./standin_process.ts", import.meta.url).pathname,
      JSON.stringify({
        socket,
        addresses: ["10.77.0.130", "10.77.0.131", "10.77.0.132"],
        eniMac: NODE_ENI_MAC,
        nodeNetns: node.node.path,
        beforeNetnsHandOver: older,
      }),
      requestLog,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.getReader();
  const { value } = await reader.read();
  assert.match(new TextDecoder().decode(value), /ready/);
  reader.releaseLock();
  return {
    pid: child.pid,
    requests: async () =>
      (await Deno.readTextFile(requestLog)).trim().split("\n").map((l) => JSON.parse(l)),
    async stop() {
      try {
        child.kill("SIGKILL");
      } catch { /* gone */ }
      await child.status;
      await child.stdout.cancel().catch(() => {});
    },
  };
}

/** The filesystem type at `path` as the process `pid` sees it (through its root). */
async function fsTypeSeenBy(pid: number, path: string): Promise<string> {
  const r = await run(["stat", "-f", "-c", "%T", `/proc/${pid}/root${path}`]);
  return r.code === 0 ? r.stdout.trim() : "missing";
}

Deno.test("a pod netns outside the daemon's mount namespace: ADD, CHECK, DEL through the plugin", async () => {
  const node = await makeNode();
  const socket = `${node.dir}/ipam.sock`;
  const stateDir = `${node.dir}/containerd-state/netns`; // seen by the daemon, not its mounts
  const otherDir = `${node.dir}/runtime-only`; // an empty tmpfs in the daemon's namespace
  await Deno.mkdir(stateDir, { recursive: true });
  await Deno.mkdir(otherDir);
  const mounted: string[] = [];
  const daemon = await startHiddenDaemon(node, socket, otherDir);
  try {
    const conf = JSON.stringify({
      cniVersion: "1.1.0",
      name: "vcn-hidden",
      type: "vpcni",
      datapath: "veth",
      mtu: 1500,
      daemonSocket: socket,
    });
    for (const [i, dir] of [stateDir, otherDir].entries()) {
      const pod = await node.pod();
      const path = `${dir}/cni-${i}`;
      await Deno.writeTextFile(path, "");
      await sh(["mount", "--bind", pod.path, path]);
      mounted.push(path);
      assert.equal(await fsTypeSeenBy(Deno.pid, path), "nsfs", "the runtime sees the netns");
      assert.notEqual(await fsTypeSeenBy(daemon.pid, path), "nsfs", "the daemon does not");
      const id = `vcn-hidden-${i}`;

      const add = await runVpcni(node, podEnv("ADD", id, path), conf);
      assert.equal(add.code, 0, add.stdout + add.stderr);
      const result = add.json!;
      const ifaces = result.interfaces as { name: string; sandbox?: string }[];
      assert.deepEqual(ifaces.filter((f) => f.sandbox).map((f) => f.sandbox), [path]);
      const ip = (result.ips as { address: string }[])[0].address.split("/")[0];
      const inPod = await sh(["ip", "-o", "-4", "addr", "show", "dev", "eth0"], {
        netns: pod.name,
      });
      assert.match(inPod, new RegExp(`inet ${ip.replaceAll(".", "\\.")}/`));

      const addReq = (await daemon.requests()).filter((r) => r.op === "add").at(-1);
      assert.equal(addReq.netns, path, "the reservation names the runtime's path");
      assert.equal(addReq.netnsHidden, true, "and says the daemon cannot see it");

      const check = await runVpcni(
        node,
        podEnv("CHECK", id, path),
        JSON.stringify({ ...JSON.parse(conf), prevResult: result }),
      );
      assert.equal(check.code, 0, check.stdout + check.stderr);

      const del = await runVpcni(node, podEnv("DEL", id, path), conf);
      assert.equal(del.code, 0, del.stdout + del.stderr);
      const links = await sh(["ip", "-o", "link", "show"], { netns: pod.name });
      assert.doesNotMatch(links, /eth0/, "DEL removed the pod's interface");
      const delReq = (await daemon.requests()).filter((r) => r.op === "del").at(-1);
      assert.equal(delReq.containerId, id);
    }

    // A DEL after the runtime removed the netns (gone in its namespace too): no netns to hand
    // over; the node's side is cleaned up and the address released, as for any gone netns.
    {
      const pod = await node.pod();
      const path = `${otherDir}/cni-gone`;
      await Deno.writeTextFile(path, "");
      await sh(["mount", "--bind", pod.path, path]);
      const nodeLinks = await sh(["ip", "-o", "link", "show"], { netns: node.node.name });
      const add = await runVpcni(node, podEnv("ADD", "vcn-hidden-gone", path), conf);
      assert.equal(add.code, 0, add.stdout + add.stderr);
      await sh(["umount", path]);
      await Deno.remove(path);
      const del = await runVpcni(node, podEnv("DEL", "vcn-hidden-gone", path), conf);
      assert.equal(del.code, 0, del.stdout + del.stderr);
      const delReq = (await daemon.requests()).filter((r) => r.op === "del").at(-1);
      assert.equal(delReq.containerId, "vcn-hidden-gone", "the address was released");
      assert.equal(
        await sh(["ip", "-o", "link", "show"], { netns: node.node.name }),
        nodeLinks,
        "the host veth is gone",
      );
    }

    // The netns socket gone (a daemon of an older release has none): the error says why
    // and what to do, and nothing is reserved.
    await Deno.remove(`${socket}.netns`);
    const pod = await node.pod();
    const path = `${stateDir}/cni-x`;
    await Deno.writeTextFile(path, "");
    await sh(["mount", "--bind", pod.path, path]);
    mounted.push(path);
    const before = (await daemon.requests()).length;
    const add = await runVpcni(node, podEnv("ADD", "vcn-hidden-x", path), conf);
    assert.equal(add.code, 1, add.stdout);
    assert.equal(add.json?.code, 4, add.stdout);
    assert.match(
      String(add.json?.msg),
      new RegExp(`mount namespace does not reach CNI_NETNS ${path}`),
    );
    assert.match(String(add.json?.details), /HostToContainer/);
    assert.equal((await daemon.requests()).length, before, "nothing was reserved");
  } finally {
    await daemon.stop();
    for (const m of mounted) await run(["umount", m]);
    await node.cleanup();
  }
});

Deno.test("a daemon from before the netns hand-over: the plugin's error names the cause and the fix", async () => {
  const node = await makeNode();
  const socket = `${node.dir}/ipam.sock`;
  const stateDir = `${node.dir}/containerd-state/netns`;
  const otherDir = `${node.dir}/runtime-only`;
  await Deno.mkdir(stateDir, { recursive: true });
  await Deno.mkdir(otherDir);
  const daemon = await startHiddenDaemon(node, socket, otherDir, true);
  const path = `${stateDir}/cni-old`;
  try {
    const pod = await node.pod();
    await Deno.writeTextFile(path, "");
    await sh(["mount", "--bind", pod.path, path]);
    const conf = JSON.stringify({
      cniVersion: "1.1.0",
      name: "vcn-hidden-old",
      type: "vpcni",
      datapath: "veth",
      mtu: 1500,
      daemonSocket: socket,
    });
    const add = await runVpcni(node, podEnv("ADD", "vcn-hidden-old", path), conf);
    assert.equal(add.code, 1, add.stdout);
    assert.equal(add.json?.code, 4, add.stdout);
    assert.match(
      String(add.json?.msg),
      new RegExp(`mount namespace does not reach CNI_NETNS ${path}.*regular file`),
    );
    assert.match(String(add.json?.details), /HostToContainer.*upgrade the daemon/);
  } finally {
    await daemon.stop();
    await run(["umount", path]);
    await node.cleanup();
  }
});
