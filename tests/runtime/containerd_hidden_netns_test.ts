/**
 * containerd with `netns_mounts_under_state_dir = true` (pod netns under its state dir) and
 * the vpcni daemon in a private mount namespace of its own, as in its DaemonSet container:
 * containerd mounts each sandbox's netns after the daemon started, where the daemon's mount
 * namespace does not reach (it sees the empty mount point only). The plugin, which containerd
 * execs in its own mount namespace, hands the netns to the daemon; sandboxes start with their
 * VPC address, and stopping them frees it.
 *
 * Needs what tests/runtime/containerd_test.ts needs (`bash tools/dev setup`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { nodeCheckpoint, startRuntimeNode } from "../helpers/runtime_node.ts";
import { Containerd, runtimeBinaries } from "../helpers/runtime_containerd.ts";
import { run } from "../helpers/sh.ts";

const TAG = `vrh${Deno.pid % 100000}`;

interface PodStatus {
  status: { state: string; network: { ip: string } };
  info: { runtimeSpec: { linux: { namespaces: { type: string; path?: string }[] } } };
}

Deno.test({
  name: "containerd, netns under its state dir, daemon in its own mount namespace: pods start",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    assert.equal(Deno.uid(), 0, "the runtime test needs root (namespaces, containerd)");
    runtimeBinaries();
    const node = await startRuntimeNode(TAG, { ownMountNamespace: true });
    let containerd: Containerd | undefined;
    let cleanupProblems: string[] = [];
    try {
      containerd = await Containerd.start({
        nodePath: node.nodePath,
        cniBinDir: node.binDir,
        cniConfDir: node.confDir,
        tag: TAG,
      });
      const ids: string[] = [];
      for (const name of ["web", "db"]) {
        const r = await containerd.crictl(["runp", await containerd.podConfig(name, {})]);
        assert.equal(r.code, 0, `sandbox ${name} did not start: ${r.stderr}`);
        ids.push(r.stdout.trim());
      }
      const cp = await nodeCheckpoint(node);
      for (const id of ids) {
        const st = JSON.parse(await containerd.crictlOk(["inspectp", id])) as PodStatus;
        assert.equal(st.status.state, "SANDBOX_READY");
        const ip = st.status.network.ip;
        const netns = st.info.runtimeSpec.linux.namespaces.find((n) => n.type === "network")?.path;
        assert.ok(netns?.startsWith(containerd.dir), `netns ${netns} is not under the state dir`);
        const addrs = await run(["nsenter", `--net=${netns}`, "ip", "-j", "-4", "addr", "show"]);
        assert.equal(addrs.code, 0, addrs.stderr);
        const local = JSON.parse(addrs.stdout).flatMap((l: { addr_info: { local: string }[] }) =>
          l.addr_info.map((a) => a.local)
        );
        assert.ok(local.includes(ip), `the pod's netns holds ${local}, not ${ip}`);
        const a = cp.allocations.find((x) => x.containerId === id);
        assert.equal(a?.ip, ip, `the checkpoint has no allocation of ${ip} for ${id}`);
        assert.equal(a?.netns, netns, "the allocation names containerd's path");
        assert.equal(a?.netnsHidden, true, "the daemon could not see the netns itself");
        assert.ok(await node.ping(node.nodePath, ip), `node cannot ping the pod at ${ip}`);
      }
      for (const id of ids) await containerd.crictlOk(["stopp", id]);
      const after = await nodeCheckpoint(node);
      for (const id of ids) {
        assert.equal(after.allocations.find((x) => x.containerId === id), undefined);
      }
      for (const id of ids) await containerd.crictlOk(["rmp", id]);
      assert.deepEqual(await containerd.podNetnsLeft(), [], "pod netns left mounted");
    } finally {
      if (containerd) cleanupProblems = await containerd.close();
      await node.close();
    }
    assert.deepEqual(cleanupProblems, [], "cleanup found leftovers");
  },
});
