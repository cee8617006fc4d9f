/**
 * The ipvlan-l2 and ipvlan-l3s datapaths, on Debian's kernel in the kernel lane (this host's
 * kernel has no ipvlan): ADD/CHECK/DEL against the real kernel, a failing ADD that must leave
 * nothing behind, and the connectivity cases between two nodes through a VPC-like fabric.
 * Run: deno task test:kernel tests/kernel/datapath_ipvlan.kernel.ts
 */
import assert from "node:assert/strict";
import { connectivityFailures, DatapathWorld } from "../helpers/datapath_world.ts";
import { simFabricFailures } from "../helpers/datapath_simfabric.ts";
import { isRoot } from "../helpers/netns.ts";
import { ipJson, sh } from "../helpers/sh.ts";
import { hostVethName } from "../../cni/datapath/mod.ts";

async function requireIpvlan(): Promise<void> {
  assert.ok(isRoot(), "the ipvlan datapath tests need root");
  const mods = await Deno.readTextFile("/proc/modules").catch(() => "");
  const builtin = await Deno.stat("/sys/module/ipvlan").then(() => true, () => false);
  assert.ok(
    mods.includes("ipvlan ") || builtin,
    "this kernel has no ipvlan: run through 'deno task test:kernel tests/kernel/datapath_ipvlan.kernel.ts'",
  );
}

async function rulesOf(ns: string): Promise<unknown> {
  return await ipJson(["rule", "show"], ns);
}

/** Link flags that follow the carrier, set by the kernel on its own schedule. */
const CARRIER_FLAGS = new Set(["NO-CARRIER", "LOWER_UP", "M-DOWN"]);

for (const kind of ["ipvlan-l2", "ipvlan-l3s"] as const) {
  const mode = kind === "ipvlan-l2" ? "l2" : "l3s";

  Deno.test(`${kind}: ADD builds the slave and the unnumbered veth, CHECK finds each missing object, DEL cleans`, async () => {
    await requireIpvlan();
    const w = await DatapathWorld.create(kind);
    try {
      const [n1] = w.nodes;
      const rulesBefore = await rulesOf(n1.ns.name);
      const pod = await w.addPod("k", n1, 1, "10.0.1.50");
      const host = hostVethName("vpc", pod.attachment.containerId, "eth0");
      const links = await ipJson<
        {
          ifname: string;
          mtu: number;
          linkinfo?: { info_kind?: string; info_data?: { mode?: string } };
        }[]
      >(
        ["-d", "link", "show"],
        pod.ns.name,
      );
      const eth0 = links.find((l) => l.ifname === "eth0");
      assert.equal(eth0?.linkinfo?.info_kind, "ipvlan");
      assert.equal(eth0?.linkinfo?.info_data?.mode, mode);
      assert.equal(eth0?.mtu, 9001);
      assert.ok(links.some((l) => l.ifname === host && l.linkinfo?.info_kind === "veth"));
      const addr = await sh(["ip", "-4", "addr", "show", "eth0"], { netns: pod.ns.name });
      assert.match(addr, /inet 10\.0\.1\.50\/24/);
      const routes = await sh(["ip", "route"], { netns: pod.ns.name });
      assert.match(routes, /default via 10\.0\.1\.1 dev eth0/);
      assert.match(
        routes,
        new RegExp(`10\\.0\\.0\\.10 via 169\\.254\\.1\\.1 dev ${host} src 10\\.0\\.1\\.50`),
      );
      assert.match(
        routes,
        new RegExp(`10\\.96\\.0\\.0/12 via 169\\.254\\.1\\.1 dev ${host} src 10\\.0\\.1\\.50`),
      );
      const rules = await sh(["ip", "rule"], { netns: n1.ns.name });
      assert.match(rules, /^1000:\s+from all to 10\.0\.1\.50 lookup main/m);
      if (mode === "l3s") assert.match(rules, /^2000:\s+from 10\.0\.1\.50 oif eth1 lookup 101/m);
      else assert.doesNotMatch(rules, /^2000:/m);
      assert.deepEqual(w.check(pod), []);

      await sh(["ip", "route", "del", "10.0.0.10/32"], { netns: pod.ns.name });
      await sh(["ip", "neigh", "del", "10.0.1.50", "dev", host], { netns: n1.ns.name });
      await sh(["ip", "rule", "del", "pref", "1000", "to", "10.0.1.50"], { netns: n1.ns.name });
      await sh(["ip", "link", "set", "eth0", "down"], { netns: pod.ns.name });
      const problems = w.check(pod);
      const want = [
        "pod: link eth0 is down",
        `pod: route 10.0.0.10/32 via 169.254.1.1 dev ${host} src 10.0.1.50 table main missing`,
        `host: neighbour 10.0.1.50 dev ${host}`,
        "host: rule 1000: to 10.0.1.50/32 lookup main missing",
      ];
      for (const p of want) {
        assert.ok(
          problems.some((x) => x.startsWith(p)),
          `missing "${p}" in:\n${problems.join("\n")}`,
        );
      }

      w.detach(pod);
      w.detach(pod);
      const left = await ipJson<{ ifname: string }[]>(["link", "show"], pod.ns.name);
      assert.deepEqual(left.map((l) => l.ifname), ["lo"]);
      assert.deepEqual(await rulesOf(n1.ns.name), rulesBefore);
      assert.doesNotMatch(await sh(["ip", "link"], { netns: n1.ns.name }), new RegExp(host));
    } finally {
      await w.destroy();
    }
  });

  Deno.test(`${kind}: an ADD failing at the rename leaves nothing behind`, async () => {
    await requireIpvlan();
    const w = await DatapathWorld.create(kind);
    try {
      const [n1] = w.nodes;
      const dump = async (ns: string) =>
        JSON.stringify([
          // Carrier and operstate settle asynchronously (linkwatch) after a peer comes up;
          // they are the kernel's, not objects the datapath makes, so they are left out.
          (await ipJson<{ flags: string[]; operstate?: string }[]>(["link", "show"], ns)).map((
            { operstate: _, ...l },
          ) => ({ ...l, flags: l.flags.filter((f) => !CARRIER_FLAGS.has(f)) })),
          // IPv4 only: the kernel adds IPv6 link-local routes on its own once DAD settles,
          // at a time no test controls, and the datapath never touches IPv6.
          await ipJson(["-4", "route", "show", "table", "all"], ns),
          await ipJson(["rule", "show"], ns),
        ]);
      // Warm up the ENI's shared setup (MTU, T(E)), which ADD keeps on purpose.
      const warm = await w.addPod("w", n1, 1, "10.0.1.60");
      w.detach(warm);
      const pod = await w.addPod("x", n1, 1, "10.0.1.61");
      w.detach(pod);
      await sh(["ip", "link", "add", "eth0", "type", "veth", "peer", "name", "other0"], {
        netns: pod.ns.name,
      });
      const before = [await dump(n1.ns.name), await dump(pod.ns.name)];
      await assert.rejects(
        () => Promise.resolve().then(() => w.reattach(pod)),
        // The datapath now refuses an existing CNI_IFNAME before it makes anything.
        /interface eth0 already exists|rename tmp[0-9a-f]{11} to eth0/,
      );
      assert.deepEqual([await dump(n1.ns.name), await dump(pod.ns.name)], before);
    } finally {
      await w.destroy();
    }
  });

  Deno.test(`${kind}: pods talk across two nodes through a VPC-like fabric`, async () => {
    await requireIpvlan();
    assert.deepEqual(await connectivityFailures(kind), []);
  });

  Deno.test(`${kind}: pods talk across two nodes through the simulator's fabric`, async () => {
    await requireIpvlan();
    assert.deepEqual(await simFabricFailures(kind), []);
  });
}
