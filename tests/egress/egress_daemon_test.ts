/**
 * Egress with the real daemon: `vpcni serve` inside a simulated node's netns (veth datapath,
 * the demo's two pools on tag-selected subnets) builds its SNAT ruleset at start; pods added
 * through the installed plugin reach the internet host behind the fabric's internet gateway
 * as the node.
 */
import assert from "node:assert/strict";
import { DemoNode } from "../../cli/demo_node.ts";
import { Internet } from "../../aws/sim/internet.ts";
import { askFarEnd, startFarEnd } from "../helpers/egress_world.ts";
import { isRoot, uniqueName } from "../helpers/netns.ts";
import { sh } from "../helpers/sh.ts";

Deno.test("daemon egress: the ruleset is built at start, and pods of both pools reach the internet as the node", async () => {
  assert.ok(isRoot(), "needs root (network namespaces)");
  const node = await DemoNode.start({
    datapath: "veth",
    instanceType: "m5.large",
    prefix: uniqueName("veg"),
  });
  let internet: Internet | undefined;
  let far: Deno.ChildProcess | undefined;
  try {
    await node.startDaemon();
    assert.ok(await node.waitReady(90_000), await Deno.readTextFile(node.daemonLog));
    const ns = node.nodeNetns;
    const table = JSON.parse(
      await sh(["nft", "-j", "list", "table", "ip", "vpcni"], { netns: ns }),
    );
    const snat = table.nftables.filter((o: { rule?: unknown }) => o.rule)
      .map((o: { rule: { expr: Record<string, unknown>[] } }) => o.rule.expr)
      .flatMap((e: Record<string, unknown>[]) => e.filter((x) => "snat" in x))
      .map((x: { snat: { addr: string; flags: string | string[] } }) => x.snat);
    assert.deepEqual(snat.map((x: { addr: string }) => x.addr), [node.nodeIp, node.nodeIp]);
    assert.deepEqual([snat[0].flags].flat(), ["fully-random"]);
    const sets = Object.fromEntries(
      table.nftables.filter((o: { set?: unknown }) => o.set).map((
        o: { set: { name: string; elem?: unknown[] } },
      ) => [o.set.name, JSON.stringify(o.set.elem ?? [])]),
    );
    assert.match(sets.vpc, /"addr":"10\.42\.0\.0","len":16/);
    assert.ok("src-internal" in sets && "src-public" in sets, JSON.stringify(Object.keys(sets)));
    assert.match(
      await sh(["ip", "rule"], { netns: ns }),
      /^1500:\s+from all fwmark 0x10000\/0xff0000 lookup main/m,
    );

    internet = await Internet.create({
      name: uniqueName("vegi"),
      fabric: node.fabric,
      vpcCidrs: ["10.42.0.0/16"],
      publicSources: [node.nodeIp],
    });
    far = await startFarEnd(internet.netns, internet.publicHost);
    for (const pool of ["internal", "public"]) {
      const pod = await node.addPod(`p-${pool}`, pool);
      assert.notEqual(pod.deviceIndex, 0, "the pod is on a secondary ENI");
      const seen = await askFarEnd(pod.netns.split("/").pop()!, internet.publicHost);
      assert.equal(seen, node.nodeIp, `pool ${pool}: the internet sees the node`);
    }
  } finally {
    if (far) {
      far.kill("SIGKILL");
      await far.status;
    }
    await internet?.destroy();
    await node.close();
  }
});
