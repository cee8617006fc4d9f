/**
 * The cniVersion trap under a real runtime: Debian's containerd 1.6 loads a vpcni conflist
 * of `cniVersion: 1.1.0`, then fails every pod sandbox, because its libcni parses results
 * up to 1.0.0 only. `vpcni install` (cniVersion auto, asking that containerd) rewrites the
 * conflist with the version it takes, and the next sandbox gets its VPC address.
 *
 * Needs what tests/runtime/containerd_test.ts needs (`bash tools/dev setup`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { DemoNode } from "../../cli/demo_node.ts";
import { Containerd, runtimeBinaries } from "../helpers/runtime_containerd.ts";
import { run } from "../helpers/sh.ts";

const TAG = `vcv${Deno.pid % 100000}`;
const HOST_VETH_PREFIX = "vcv";
const main = new URL("../../main.ts", import.meta.url).pathname;

/** The cniVersion of the network containerd has loaded, once it is `want` (or the last). */
async function loadedCniVersion(c: Containerd, want: string): Promise<string | undefined> {
  let seen: string | undefined;
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const info = JSON.parse(await c.crictlOk(["info"]));
    const nets = (info.cniconfig?.Networks ?? []) as {
      Config: { Name: string; CNIVersion: string };
    }[];
    seen = nets.find((n) => n.Config.Name === "vpcni")?.Config.CNIVersion;
    if (seen === want) return seen;
    await new Promise((r) => setTimeout(r, 250));
  }
  return seen;
}

Deno.test({
  name: "containerd 1.6: a 1.1.0 conflist fails every sandbox; install's cniVersion choice runs it",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    assert.equal(Deno.uid(), 0, "the runtime test needs root (namespaces, containerd)");
    const bins = runtimeBinaries();
    const node = await DemoNode.start({
      datapath: "veth",
      instanceType: "m5.large",
      prefix: TAG,
      cniVersion: "1.1.0",
      hostVethPrefix: HOST_VETH_PREFIX,
    });
    let containerd: Containerd | undefined;
    let problems: string[] = [];
    try {
      await node.startDaemon();
      assert.ok(await node.waitReady(90_000), "the vpcni daemon did not become ready");
      containerd = await Containerd.start({
        nodePath: node.nodePath,
        cniBinDir: node.binDir,
        cniConfDir: node.confDir,
        tag: TAG,
      });
      assert.equal(await loadedCniVersion(containerd, "1.1.0"), "1.1.0", "containerd loads it");
      const failed = await containerd.crictl(["runp", await containerd.podConfig("old", {})]);
      assert.notEqual(failed.code, 0, "a sandbox ran on a 1.1.0 conflist under containerd 1.6");
      assert.match(failed.stderr, /unsupported CNI result version \\?"1\.1\.0/);

      // What the init container does: install with cniVersion auto, asking containerd.
      const r = await run([
        "deno",
        "run",
        "-A",
        "--quiet",
        main,
        "install",
        "--skip-binary",
        "--bin-dir",
        node.binDir,
        "--conflist-file",
        node.conflistFile,
        "--config",
        `${node.root}/vpcni.yaml`,
        "--host-veth-prefix",
        HOST_VETH_PREFIX,
        "--containerd",
        bins.containerd,
        "--json",
      ]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(JSON.parse(r.stdout).cniVersion.version, "1.0.0");
      assert.equal(await loadedCniVersion(containerd, "1.0.0"), "1.0.0", "containerd reloads");

      const id = (await containerd.crictlOk(["runp", await containerd.podConfig("new", {})]))
        .trim();
      const st = JSON.parse(await containerd.crictlOk(["inspectp", id]));
      assert.equal(st.status.state, "SANDBOX_READY");
      const ip: string = st.status.network.ip;
      assert.ok(node.whereIs(ip), `the sandbox got ${ip}, which no ENI of the VPC holds`);
    } finally {
      if (containerd) problems = await containerd.close();
      await node.close();
    }
    assert.deepEqual(problems, [], "cleanup found leftovers");
  },
});
