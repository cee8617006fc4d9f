/**
 * Egress with the real daemon: `vpcni serve` inside a simulated node's netns (veth datapath,
 * the demo's two pools on tag-selected subnets) builds its SNAT ruleset at start; pods added
 * through the installed plugin reach the internet host behind the fabric's internet gateway
 * as the node. The marks of every ENI are in place before a pod on it is wired, and before the
 * daemon says it is ready.
 */
import assert from "node:assert/strict";
import { DemoNode } from "../../cli/demo_node.ts";
import { DEMO_INSTANCE } from "../../cli/demo_world.ts";
import { Internet } from "../../aws/sim/internet.ts";
import { askFarEnd, startFarEnd } from "../helpers/egress_world.ts";
import { isRoot, uniqueName } from "../helpers/netns.ts";
import { run, sh } from "../helpers/sh.ts";

/** The daemon's introspection, on the node netns's loopback. */
const INTROSPECTION = "http://127.0.0.1:61679";

/** The HTTP status of `path` of the daemon's introspection ("000": nothing answers). */
async function introspect(netns: string, path: string): Promise<string> {
  const url = `${INTROSPECTION}${path}`;
  return (await run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", url], { netns }))
    .stdout;
}

/** Waits (bounded) until `path` answers 200. */
async function until200(netns: string, path: string, node: DemoNode): Promise<void> {
  const deadline = Date.now() + 90_000;
  while (await introspect(netns, path) !== "200") {
    assert.ok(Date.now() < deadline, `${path}: ${await Deno.readTextFile(node.daemonLog)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The node's secondary ENIs as EC2 (the simulator) has them attached: device index, MAC. */
function secondaryEnis(node: DemoNode): { d: number; mac: string }[] {
  return [...node.sim.state.enis.values()]
    .filter((e) => e.attachment?.instanceId === DEMO_INSTANCE && e.attachment.deviceIndex > 0)
    .map((e) => ({ d: e.attachment!.deviceIndex, mac: e.mac }));
}

/**
 * Asserts that the ENIs at `deviceIndexes` have their egress marks now: the policy rule
 * `fwmark (d+1)<<16 lookup T(d)` and the nft rule marking connections that enter by them.
 */
async function assertMarked(netns: string, deviceIndexes: number[], when: string) {
  const [rules, table] = await Promise.all([
    sh(["ip", "rule"], { netns }),
    sh(["nft", "-j", "list", "table", "ip", "vpcni"], { netns }),
  ]);
  const comments: string[] = JSON.parse(table).nftables
    .filter((o: { rule?: unknown }) => o.rule)
    .map((o: { rule: { comment?: string } }) => o.rule.comment ?? "");
  for (const d of deviceIndexes) {
    const mark = `0x${((d + 1) << 16).toString(16)}`;
    assert.match(
      rules,
      new RegExp(`^1500:\\s+from all fwmark ${mark}/0xff0000 lookup \\d+`, "m"),
      `${when}: ENI #${d} has no mark rule\n${rules}`,
    );
    assert.ok(
      comments.some((c) => c.startsWith(`entered through ENI #${d} `)),
      `${when}: connections entering by ENI #${d} are not marked: ${comments.join("; ")}`,
    );
  }
}

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
      // Its ENI was attached after the ruleset's first build: its marks came before the pod.
      await assertMarked(ns, [pod.deviceIndex], `pool ${pool}'s pod is wired`);
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

Deno.test("daemon egress: when /readyz first says ready, the ENIs the pools attached at start have their marks", async () => {
  assert.ok(isRoot(), "needs root (network namespaces)");
  // The demo's two pools are on different subnets: each needs an ENI of its own, attached by
  // the start's growth, after the ruleset's first build.
  const node = await DemoNode.start({
    datapath: "veth",
    instanceType: "m5.large",
    prefix: uniqueName("vegs"),
  });
  try {
    await node.startDaemon();
    await until200(node.nodeNetns, "/readyz", node);
    const atReady = secondaryEnis(node).map((e) => e.d);
    const deadline = Date.now() + 90_000;
    while (secondaryEnis(node).length < 2) {
      assert.ok(Date.now() < deadline, "the pools attached their ENIs");
      await new Promise((r) => setTimeout(r, 20));
    }
    const attached = secondaryEnis(node).map((e) => e.d);
    await assertMarked(node.nodeNetns, attached, "when /readyz first says ready");
    assert.deepEqual(atReady, attached, "ready came once the start's growth had attached them");
  } finally {
    await node.close();
  }
});

Deno.test("daemon egress: ENIs whose links come up after the daemon started have their marks when /readyz first says ready", async () => {
  assert.ok(isRoot(), "needs root (network namespaces)");
  // The demo's two pools are on different subnets: each gets an ENI of its own.
  const node = await DemoNode.start({
    datapath: "veth",
    instanceType: "m5.large",
    prefix: uniqueName("vegr"),
  });
  const ns = node.nodeNetns;
  const secondary = () => secondaryEnis(node);
  try {
    await node.startDaemon();
    assert.ok(await node.waitReady(90_000), await Deno.readTextFile(node.daemonLog));
    await until200(ns, "/readyz", node);
    const deadline = Date.now() + 90_000;
    while (secondary().length < 2) {
      assert.ok(Date.now() < deadline, "the pools attached their ENIs");
      await new Promise((r) => setTimeout(r, 100));
    }
    await node.stopDaemon();
    // As after a reboot: the kernel holds none of the ruleset, the ENIs are still attached,
    // and their links come up only once the daemon has started (a link with another MAC is,
    // to the daemon, no link of the ENI).
    await sh(["nft", "delete", "table", "ip", "vpcni"], { netns: ns });
    while ((await run(["ip", "rule", "del", "pref", "1500"], { netns: ns })).code === 0);
    const enis = secondary();
    const hide = (d: number, mac: string) =>
      sh(["ip", "link", "set", "dev", `eth${d}`, "address", mac], { netns: ns });
    for (const { d } of enis) await hide(d, `02:00:5e:00:00:${d.toString(16).padStart(2, "0")}`);
    await node.startDaemon();
    await until200(ns, "/healthz", node); // up: the ruleset's first build is behind it
    for (const { d, mac } of enis) await hide(d, mac);
    await until200(ns, "/readyz", node);
    await assertMarked(ns, enis.map((e) => e.d), "when /readyz first says ready");
  } finally {
    await node.close();
  }
});
