/**
 * The veth datapath on this kernel, in netns the tests create (prefix `vdp`): ADD, CHECK,
 * DEL against the real kernel, failures that must leave nothing behind, and real traffic
 * between two nodes through a VPC-like fabric.
 */
import assert from "node:assert/strict";
import {
  attachPod,
  checkPod,
  DatapathInputError,
  detachPod,
  hostVethName,
  type PodAttachment,
  prepareHost,
} from "../../cni/datapath/mod.ts";
import { createNetns, deleteNetns, type TestNetns, uniqueName } from "../helpers/netns.ts";
import {
  addEniLink,
  onNode,
  requireDatapathRoot,
  secondaryEni,
  VETH_CFG,
  withEniNode,
} from "../helpers/datapath_node.ts";
import { ipJson, sh } from "../helpers/sh.ts";
import { connectivityFailures, DatapathWorld } from "../helpers/datapath_world.ts";
import { IfNameTakenError } from "../../cni/datapath/errors.ts";

const CFG = VETH_CFG;
const ENI1 = secondaryEni("02:00:00:aa:01:00");

/** A node netns with a secondary ENI link (eth1, ENI1's MAC) and an empty pod netns. */
function withNodeAndPod(
  fn: (node: TestNetns, pod: TestNetns, attachment: PodAttachment) => Promise<void>,
): Promise<void> {
  return withEniNode({ prefix: "vdp", eni: ENI1 }, (node, [pod], at) => fn(node, pod, at(0)));
}

/** Link flags that follow the carrier, set by the kernel a moment after the change. */
const CARRIER_FLAGS = ["NO-CARRIER", "LOWER_UP", "M-DOWN"];

/** Everything the datapath could touch in a netns, as ip -j shows it. */
async function dump(ns: string): Promise<string> {
  const links = (await ipJson<Record<string, unknown>[]>(["link", "show"], ns)).map((l) =>
    [
      l.ifname,
      l.mtu,
      l.address,
      (l.flags as string[]).filter((f) => !CARRIER_FLAGS.includes(f)).join(","),
    ].join(" ")
  );
  const addrs =
    (await ipJson<{ ifname: string; addr_info: { local: string; prefixlen: number }[] }[]>(
      ["addr", "show"],
      ns,
    )).flatMap((a) => a.addr_info.map((i) => `${a.ifname} ${i.local}/${i.prefixlen}`));
  const routes = await ipJson(["route", "show", "table", "all"], ns);
  const rules = await ipJson(["rule", "show"], ns);
  const neighs = (await ipJson<{ dst: string; dev: string; lladdr?: string; state: string[] }[]>(
    ["neigh", "show"],
    ns,
  )).filter((n) => n.state.includes("PERMANENT")).map((n) => `${n.dst} ${n.dev} ${n.lladdr}`);
  return JSON.stringify({ links, addrs, routes, rules, neighs }, null, 1);
}

Deno.test("veth: ADD builds every object, CHECK is clean, DEL removes them all", async () => {
  await withNodeAndPod(async (node, pod, a) => {
    const nodeBefore = await dump(node.name);
    const podBefore = await dump(pod.name);
    const res = onNode(node, () => attachPod(CFG, a));
    const host = hostVethName("vpc", a.containerId, "eth0");
    assert.equal(res.interfaces[0].name, host);
    assert.equal(res.interfaces[1].sandbox, pod.path);
    assert.deepEqual(res.ips, [{ address: "10.0.1.20/32", gateway: "169.254.1.1", interface: 1 }]);

    const podLink = await ipJson<{ ifname: string; mtu: number; address: string }[]>(
      ["link", "show", "eth0"],
      pod.name,
    );
    assert.equal(podLink[0].mtu, 9001);
    assert.equal(podLink[0].address, res.interfaces[1].mac);
    const podRoutes = await sh(["ip", "route"], { netns: pod.name });
    assert.match(podRoutes, /default via 169\.254\.1\.1 dev eth0/);
    const neigh = await sh(["ip", "neigh", "show", "169.254.1.1"], { netns: pod.name });
    assert.match(neigh, new RegExp(`lladdr ${res.interfaces[0].mac} PERMANENT`));
    const rules = await sh(["ip", "rule"], { netns: node.name });
    assert.match(rules, /^1000:\s+from all to 10\.0\.1\.20 lookup main/m);
    assert.match(rules, /^2000:\s+from 10\.0\.1\.20 lookup 101/m);
    const t101 = await sh(["ip", "route", "show", "table", "101"], { netns: node.name });
    assert.match(t101, /default via 10\.0\.1\.1 dev eth1/);
    assert.match(t101, /10\.0\.1\.0\/24 dev eth1 scope link/);
    assert.match(
      await sh(["ip", "route"], { netns: node.name }),
      new RegExp(`10\\.0\\.1\\.20 dev ${host} scope link`),
    );
    const eth1 = await ipJson<{ mtu: number; flags: string[] }[]>(
      ["link", "show", "eth1"],
      node.name,
    );
    assert.equal(eth1[0].mtu, 9001);
    assert.ok(eth1[0].flags.includes("UP"));
    assert.equal(
      (await sh(["sysctl", "-n", "net.ipv4.ip_forward"], { netns: node.name })).trim(),
      "1",
    );

    assert.deepEqual(onNode(node, () => checkPod(CFG, a)), []);

    onNode(node, () => detachPod(CFG, a));
    assert.equal(await dump(pod.name), podBefore);
    // The ENI's own setup (up, MTU, T(E), forwarding) is shared and stays; the pod's is gone.
    const after = JSON.parse(await dump(node.name));
    const before = JSON.parse(nodeBefore);
    assert.deepEqual(after.rules, before.rules);
    assert.deepEqual(after.neighs, before.neighs);
    assert.ok(!JSON.stringify(after).includes(host), "host veth left behind");
    assert.ok(!JSON.stringify(after.routes).includes("10.0.1.20"), "pod route left behind");
  });
});

Deno.test("veth: CHECK names each deleted or changed object", async () => {
  await withNodeAndPod(async (node, pod, a) => {
    onNode(node, () => attachPod(CFG, a));
    const host = hostVethName("vpc", a.containerId, "eth0");
    await sh(["ip", "rule", "del", "pref", "2000", "from", "10.0.1.20"], { netns: node.name });
    await sh(["ip", "route", "del", "10.0.1.20/32", "dev", host], { netns: node.name });
    await sh(["ip", "neigh", "del", "169.254.1.1", "dev", "eth0"], { netns: pod.name });
    await sh(["ip", "route", "del", "default"], { netns: pod.name });
    await sh(["ip", "link", "set", host, "mtu", "1500"], { netns: node.name });
    await sh(["ip", "route", "del", "default", "table", "101"], { netns: node.name });
    const problems = onNode(node, () => checkPod(CFG, a));
    const want = [
      `host: link ${host} has MTU 1500, expected 9001`,
      "host: rule 2000: from 10.0.1.20/32 lookup 101 missing",
      `host: route 10.0.1.20/32 dev ${host} scope link table main missing`,
      "pod: neighbour 169.254.1.1 dev eth0",
      "pod: route default via 169.254.1.1 dev eth0 table main missing",
      "host: route default via 10.0.1.1 dev eth1 table 101 missing",
    ];
    for (const w of want) {
      assert.ok(
        problems.some((p) => p.startsWith(w)),
        `CHECK did not report "${w}"; got:\n${problems.join("\n")}`,
      );
    }
    assert.equal(problems.length, want.length, problems.join("\n"));
    onNode(node, () => detachPod(CFG, a));
  });
});

Deno.test("veth: DEL is idempotent: twice, without address, after the netns is gone", async () => {
  await withNodeAndPod(async (node, pod, a) => {
    const before = await dump(node.name);
    onNode(node, () => attachPod(CFG, a));
    const afterAdd = await dump(node.name);
    // Without the address, the pod IP is read back from the host veth's route.
    onNode(
      node,
      () => detachPod(CFG, { containerId: a.containerId, ifName: "eth0", netns: a.netns }),
    );
    onNode(node, () => detachPod(CFG, a));
    onNode(node, () => detachPod(CFG, { containerId: a.containerId, ifName: "eth0" }));
    const afterDel = await dump(node.name);
    assert.notEqual(afterAdd, afterDel);
    assert.deepEqual(JSON.parse(afterDel).rules, JSON.parse(before).rules);

    // The runtime deleted the netns first: the veth went with it, DEL still drops the rules.
    onNode(node, () => attachPod(CFG, a));
    await deleteNetns(pod.name);
    onNode(node, () => detachPod(CFG, a));
    onNode(node, () => detachPod(CFG, a));
    assert.deepEqual(JSON.parse(await dump(node.name)).rules, JSON.parse(before).rules);
    assert.deepEqual(onNode(node, () => checkPod(CFG, a)), [
      `pod: netns ${pod.path} does not exist`,
    ]);
  });
});

Deno.test("veth: an ADD failing midway leaves host and pod exactly as they were", async () => {
  await withNodeAndPod(async (node, pod, a) => {
    onNode(
      node,
      () => attachPod(CFG, { ...a, containerId: "warmup", netns: a.netns, ifName: "net9" }),
    );
    onNode(node, () => detachPod(CFG, { containerId: "warmup", ifName: "net9", netns: a.netns }));
    // 1. The ifname is taken in the pod: refused before anything is made (it used to fail
    //    at the rename, after the veth was made); either way nothing is left.
    await sh(["ip", "link", "add", "eth0", "type", "veth", "peer", "name", "other0"], {
      netns: pod.name,
    });
    let nodeBefore = await dump(node.name);
    let podBefore = await dump(pod.name);
    assert.throws(() => onNode(node, () => attachPod(CFG, a)), (e: unknown) => {
      assert.ok(e instanceof IfNameTakenError, String(e));
      assert.match(e.message, /interface eth0 already exists/);
      return true;
    });
    assert.equal(await dump(node.name), nodeBefore);
    assert.equal(await dump(pod.name), podBefore);
    await sh(["ip", "link", "del", "eth0"], { netns: pod.name });

    // 2. The pod IP is already routed on the host (an IP handed out twice): fails on the
    //    last step, after the pod side and both rules were made.
    await sh(["ip", "link", "set", "wire1", "name", "dupe0"], { netns: node.name });
    await sh(["ip", "route", "add", "10.0.1.20/32", "dev", "dupe0"], { netns: node.name });
    nodeBefore = await dump(node.name);
    podBefore = await dump(pod.name);
    assert.throws(
      () => onNode(node, () => attachPod(CFG, a)),
      /add route 10\.0\.1\.20\/32 dev vpc[0-9a-f]{11} scope link table main: .*File exists/,
    );
    assert.equal(await dump(node.name), nodeBefore);
    assert.equal(await dump(pod.name), podBefore);
  });
});

Deno.test("veth: bad input is refused before anything changes", async () => {
  await withNodeAndPod(async (node, _pod, a) => {
    const before = await dump(node.name);
    const bad: [string, () => unknown, RegExp][] = [
      ["ifname", () => attachPod(CFG, { ...a, ifName: "way-too-long-name0" }), /ifName .* bytes/],
      [
        "ip",
        () => attachPod(CFG, { ...a, address: { ...a.address, ip: "10.0.1.300" } }),
        /address\.ip/,
      ],
      [
        "subnet",
        () => attachPod(CFG, { ...a, address: { ...a.address, ip: "10.9.1.3" } }),
        /outside the ENI's subnet/,
      ],
      [
        "kind",
        () => attachPod({ ...CFG, kind: "bridge" as "veth" }, a),
        /datapath "bridge" is unknown/,
      ],
      ["mtu", () => attachPod({ ...CFG, mtu: 70000 }, a), /mtu must be/],
      ["prefix", () => attachPod({ ...CFG, hostVethPrefix: "toolong" }, a), /hostVethPrefix/],
      [
        "netns",
        () => attachPod(CFG, { ...a, netns: "/run/netns/vdp-missing" }),
        /netns .* does not exist/,
      ],
    ];
    for (const [what, fn, msg] of bad) {
      assert.throws(() => onNode(node, fn), (e: unknown) => {
        assert.ok(e instanceof DatapathInputError, `${what}: ${e}`);
        assert.match(e.message, msg, what);
        return true;
      });
    }
    assert.equal(await dump(node.name), before);
  });
});

Deno.test("veth: ENI link missing is a clear error and changes nothing", async () => {
  await withNodeAndPod(async (node, pod, a) => {
    const before = [await dump(node.name), await dump(pod.name)];
    const lost = { ...a, address: { ...a.address, eni: { ...ENI1, mac: "02:00:00:ee:ee:ee" } } };
    assert.throws(
      () => onNode(node, () => attachPod(CFG, lost)),
      /no link has MAC 02:00:00:ee:ee:ee/,
    );
    assert.deepEqual([await dump(node.name), await dump(pod.name)], before);
  });
});

Deno.test("veth: pods talk across two nodes through a VPC-like fabric", async () => {
  requireDatapathRoot();
  const failures = await connectivityFailures("veth");
  assert.deepEqual(failures, []);
});

Deno.test("veth: without `from <pod> lookup T(E)` the fabric drops the pod's traffic", async () => {
  requireDatapathRoot();
  const w = await DatapathWorld.create("veth");
  try {
    const [n1, n2] = w.nodes;
    const p1 = await w.addPod("s", n1, 1, "10.0.1.40");
    const p2 = await w.addPod("t", n2, 1, "10.0.1.41");
    assert.ok(await w.ping(p1.ns.name, p2.ip), "baseline ping failed");
    await sh(["ip", "rule", "del", "pref", "2000", "from", p1.ip], { netns: n1.ns.name });
    assert.deepEqual(w.check(p1), [`host: rule 2000: from ${p1.ip}/32 lookup 101 missing`]);
    assert.ok(
      !(await w.ping(p1.ns.name, p2.ip)),
      "ping passed with the pod's source leaving by eth0",
    );
    const eth0 = w.fabric.enis.find((e) => e.node === n1.ns && e.deviceIndex === 0)!;
    assert.ok((await w.fabric.drops(eth0)) > 0, "the fabric did not count the spoofed source");
    w.detach(p1);
    w.detach(p2);
    assert.deepEqual(
      await sh(["ip", "rule"], { netns: n2.ns.name }),
      await sh(["ip", "rule"], { netns: n1.ns.name }),
    );
  } finally {
    await w.destroy();
  }
});

Deno.test("veth: 50 pods on one node, ADD then DEL, leave no link, route, rule or neighbour", async () => {
  requireDatapathRoot();
  const node = await createNetns(uniqueName("vdpn"));
  const pods: TestNetns[] = [];
  try {
    await addEniLink(node, ENI1);
    // Warm the ENI's shared setup, then take the baseline.
    onNode(node, () => prepareHost(CFG, ENI1));
    const before = await dump(node.name);
    const attachments: PodAttachment[] = [];
    for (let i = 0; i < 50; i++) {
      const pod = await createNetns(uniqueName("vdpp"));
      pods.push(pod);
      attachments.push({
        containerId: `ctr-${i}`,
        ifName: "eth0",
        netns: pod.path,
        address: { ip: `10.0.1.${100 + i}`, prefixLen: 24, gateway: "10.0.1.1", eni: ENI1 },
      });
    }
    const names = new Set(
      onNode(node, () => attachments.map((a) => attachPod(CFG, a).interfaces[0].name)),
    );
    assert.equal(names.size, 50);
    const rules = await sh(["ip", "rule"], { netns: node.name });
    assert.equal(rules.match(/lookup 101/g)?.length, 50);
    for (const a of attachments.slice(0, 5)) {
      assert.deepEqual(onNode(node, () => checkPod(CFG, a)), []);
    }
    onNode(node, () => attachments.forEach((a) => detachPod(CFG, a)));
    assert.equal(await dump(node.name), before);
  } finally {
    for (const p of pods) await deleteNetns(p.name);
    await deleteNetns(node.name);
  }
});

Deno.test("veth: prepareHost is idempotent, CHECK reports the ENI's setup, prepareHost repairs it", async () => {
  await withNodeAndPod(async (node, _pod, a) => {
    const eni = { ...ENI1, primaryIp: "10.0.1.4" };
    const pod = { ...a, address: { ...a.address, eni } };
    onNode(node, () => prepareHost(CFG, eni));
    const once = await dump(node.name);
    onNode(node, () => prepareHost(CFG, eni));
    assert.equal(await dump(node.name), once);
    const eth1 = await sh(["ip", "-4", "addr", "show", "eth1"], { netns: node.name });
    assert.match(eth1, /inet 10\.0\.1\.4\/24 .*noprefixroute/);
    const sysctl = (k: string) =>
      sh(["sysctl", "-n", k], { netns: node.name }).then((v) => v.trim());
    assert.equal(await sysctl("net.ipv4.conf.eth1.proxy_arp"), "1");
    assert.equal(await sysctl("net.ipv4.neigh.eth1.proxy_delay"), "0");

    onNode(node, () => attachPod(CFG, pod));
    assert.deepEqual(onNode(node, () => checkPod(CFG, pod)), []);
    await sh(["ip", "addr", "del", "10.0.1.4/24", "dev", "eth1"], { netns: node.name });
    await sh(["sysctl", "-qw", "net.ipv4.conf.eth1.proxy_arp=0"], { netns: node.name });
    await sh(["ip", "link", "set", "eth1", "down"], { netns: node.name });
    assert.deepEqual(
      onNode(node, () => checkPod(CFG, pod)).sort(),
      [
        "host: ENI link eth1 (eni-01) is down",
        "host: address 10.0.1.4/24 on ENI link eth1 missing",
        // Taking the last address off a link, or the link down, flushes its routes.
        "host: route 10.0.1.1/32 dev eth1 scope link table 101 missing",
        "host: route default via 10.0.1.1 dev eth1 table 101 missing",
        "host: route 10.0.1.0/24 dev eth1 scope link table 101 missing",
        "host: sysctl net/ipv4/conf/eth1/proxy_arp is 0, expected 1",
      ].sort(),
    );
    onNode(node, () => prepareHost(CFG, eni));
    assert.deepEqual(onNode(node, () => checkPod(CFG, pod)), []);
    onNode(node, () => detachPod(CFG, pod));
  });
});
