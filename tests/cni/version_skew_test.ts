/**
 * A rolling upgrade: this release's thin plugin against a daemon of the previous release,
 * which speaks only protocol 1 (reservations) and refuses the invocation (`cni`, protocol 2)
 * as that release refused any version it did not speak. The plugin must notice and do the
 * pod itself over protocol 1 — ADD, CHECK and DEL all succeed with the daemon's address —
 * never answer wrongly. The old daemon is the stand-in with the invocation refused exactly
 * as the previous daemon words it (a mock of that one answer: the previous release cannot
 * run here).
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { startNodeStandin, vethDaemonConf } from "../helpers/cni_standin_node.ts";
import { makeNode, podEnv, runVpcni } from "./harness.ts";

Deno.test("a daemon of the previous protocol: the plugin wires the pod itself, with the daemon's address", async () => {
  const node = await makeNode();
  const standin = startNodeStandin(node, { addresses: ["10.77.0.130"], protocol1Only: true });
  try {
    const conf = JSON.stringify(vethDaemonConf("vcn-skew", standin.socket));
    const pod = await node.pod();
    const env = (cmd: string) => podEnv(cmd, "vcn-skew-1", pod.path);
    const before = await kernelState(node.node.name);
    const add = await runVpcni(node, env("ADD"), conf);
    assert.equal(add.code, 0, add.stdout + add.stderr);
    const ips = (add.json as { ips: { address: string }[] }).ips;
    assert.equal(ips[0].address, "10.77.0.130/32");
    const ops = standin.requests.map((r) => `${r.op}/${r.version}`);
    assert.deepEqual(ops, ["cni/2", "add/1"], "asked once in protocol 2, then in protocol 1");
    const prev = JSON.stringify({ ...JSON.parse(conf), prevResult: add.json });
    const check = await runVpcni(node, env("CHECK"), prev);
    assert.equal(check.code, 0, check.stdout);
    const del = await runVpcni(node, env("DEL"), prev);
    assert.equal(del.code, 0, del.stdout);
    assert.equal(standin.reservations.size, 0);
    assert.deepEqual(await kernelState(node.node.name), before);
  } finally {
    await standin.close();
    await node.cleanup();
  }
});
