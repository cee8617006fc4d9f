/**
 * kill -9 of the daemon in the middle of an ADD: the daemon runs the invocation (the thin
 * plugin only forwards it), so a daemon that dies mid-way leaves whatever its worker had made
 * so far. The runtime's DEL that follows, with the daemon still down, must remove all of it:
 * the node and the pod netns end as they were before the ADD.
 *
 * The daemon here is the stand-in's pools with the daemon's own CNI service and worker
 * (ipam/cni_service.ts, ipam/cni_worker.ts), in a process of its own that the test kills;
 * the kill lands at spread-out moments of the ADD, from before the reservation to after the
 * answer.
 */
import assert from "node:assert/strict";
import { kernelState, linkNames } from "../helpers/cni_kernel_state.ts";
import { makeNode, NODE_ENI_MAC, podEnv, runVpcni } from "./harness.ts";

const ROUNDS = Number(Deno.env.get("VPCNI_KILL_ROUNDS") ?? 8);

async function startDaemonProcess(socket: string, nodeNetns: string) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--no-check",
      new URL("./standin_process.ts", import.meta.url).pathname,
      JSON.stringify({
        socket,
        addresses: ["10.77.0.120", "10.77.0.121"],
        eniMac: NODE_ENI_MAC,
        nodeNetns,
      }),
    ],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const reader = child.stdout.getReader();
  const { value } = await reader.read();
  assert.match(new TextDecoder().decode(value), /ready/);
  reader.releaseLock();
  return {
    async kill9() {
      try {
        child.kill("SIGKILL");
      } catch { /* gone */ }
      await child.status;
      await child.stdout.cancel().catch(() => {});
      await Deno.remove(socket).catch(() => {});
    },
  };
}

Deno.test("kill -9 of the daemon mid-ADD: the DEL that follows, daemon down, leaves nothing", async () => {
  const node = await makeNode();
  const socket = `${node.dir}/ipam.sock`;
  try {
    const conf = JSON.stringify({
      cniVersion: "1.1.0",
      name: "vcn-kill",
      type: "vpcni",
      datapath: "veth",
      mtu: 1500,
      daemonSocket: socket,
      daemonTimeoutMs: 5000,
    });
    const pod = await node.pod();
    const env = (cmd: string, id: string) => podEnv(cmd, id, pod.path);
    const nodeBefore = await kernelState(node.node.name);
    const podBefore = await linkNames(pod.name);

    // How long a whole ADD takes here, so the kills spread over it.
    let daemon = await startDaemonProcess(socket, node.node.path);
    const t0 = performance.now();
    const full = await runVpcni(node, env("ADD", "vcn-kill-0"), conf);
    const addMs = performance.now() - t0;
    assert.equal(full.code, 0, full.stdout + full.stderr);
    const del0 = await runVpcni(node, env("DEL", "vcn-kill-0"), conf);
    assert.equal(del0.code, 0, del0.stdout);
    await daemon.kill9();

    const outcomes: string[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      daemon = await startDaemonProcess(socket, node.node.path);
      const id = `vcn-kill-${round}`;
      const add = runVpcni(node, env("ADD", id), conf);
      await new Promise((r) => setTimeout(r, (addMs * 1.2 * round) / ROUNDS));
      await daemon.kill9();
      const r = await add;
      outcomes.push(r.code === 0 ? "added" : `code ${r.json?.code}`);
      // The runtime DELs a pod whose ADD failed (or after it is done); the daemon is down.
      const prev = r.code === 0 ? { prevResult: r.json } : {};
      const del = await runVpcni(
        node,
        env("DEL", id),
        JSON.stringify({ ...JSON.parse(conf), ...prev }),
      );
      assert.equal(del.code, 0, `round ${round}: ${del.stdout} ${del.stderr}`);
      assert.deepEqual(
        await kernelState(node.node.name),
        nodeBefore,
        `round ${round} (${outcomes.at(-1)}): the node is as before`,
      );
      assert.deepEqual(await linkNames(pod.name), podBefore, `round ${round}: the pod is empty`);
    }
    console.log(`ADD ${addMs.toFixed(0)} ms; kills: ${outcomes.join(", ")}`);
  } finally {
    await node.cleanup();
  }
});
