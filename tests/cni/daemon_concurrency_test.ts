/**
 * The daemon runs pods' invocations on workers of its own, one attachment at a time: a slow
 * ADD (its reservation held back by the daemon) must not hold up another pod's ADD nor the
 * daemon's own thread, and a DEL of the slow pod sent while its ADD is still running waits for
 * that ADD and then removes all it made. Real plugin processes, the daemon's CNI service with
 * the stand-in's pools, a test node netns.
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { startNodeStandin, vethDaemonConf } from "../helpers/cni_standin_node.ts";
import { makeNode, NODE_ENI_MAC, podEnv, runVpcni } from "./harness.ts";

/** How long the daemon holds back the slow pod's reservation. */
const HOLD_MS = 5000;

Deno.test("a slow ADD holds up neither other pods nor the daemon; its DEL waits for it", async () => {
  const node = await makeNode();
  const standin = startNodeStandin(node, {
    addresses: ["10.77.0.140", "10.77.0.141"],
    eniMac: NODE_ENI_MAC,
    onRequest: async (req) => {
      if (req.op === "add" && req.containerId === "vcn-slow") {
        await new Promise((r) => setTimeout(r, HOLD_MS));
      }
    },
  });
  try {
    const conf = JSON.stringify(
      vethDaemonConf("vcn-conc", standin.socket, { daemonTimeoutMs: 30_000 }),
    );
    const [slowPod, fastPod] = [await node.pod(), await node.pod()];
    const before = await kernelState(node.node.name);
    const done: string[] = [];
    const slowAdd = runVpcni(node, podEnv("ADD", "vcn-slow", slowPod.path), conf).then((r) => {
      done.push("slow ADD");
      return r;
    });
    // The slow ADD is in the daemon, waiting for its reservation.
    while (!standin.requests.some((r) => r.op === "add" && r.containerId === "vcn-slow")) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const slowDel = runVpcni(node, podEnv("DEL", "vcn-slow", slowPod.path), conf).then((r) => {
      done.push("slow DEL");
      return r;
    });
    const fast = await runVpcni(node, podEnv("ADD", "vcn-fast", fastPod.path), conf);
    done.push("fast ADD");
    assert.equal(fast.code, 0, fast.stdout + fast.stderr);
    const status = await runVpcni(node, { CNI_COMMAND: "STATUS" }, conf);
    done.push("STATUS");
    assert.equal(status.code, 0, status.stdout);

    const [add, del] = [await slowAdd, await slowDel];
    assert.equal(add.code, 0, add.stdout + add.stderr);
    assert.equal(del.code, 0, del.stdout + del.stderr);
    assert.deepEqual(done, ["fast ADD", "STATUS", "slow ADD", "slow DEL"]);
    assert.deepEqual(
      [...standin.reservations.values()].map((a) => a.containerId),
      ["vcn-fast"],
      "the slow pod's DEL released what its ADD reserved",
    );
    const delFast = await runVpcni(node, podEnv("DEL", "vcn-fast", fastPod.path), conf);
    assert.equal(delFast.code, 0, delFast.stdout);
    assert.deepEqual(await kernelState(node.node.name), before, "nothing of either pod is left");
  } finally {
    await standin.close();
    await node.cleanup();
  }
});
