import assert from "node:assert/strict";
import type { Link } from "../../netlink/mod.ts";
import { compareEni, comparePod, podSysctlKeys } from "./compare.ts";
import { type Plan, planAttachment } from "./plan.ts";
import type { DatapathConfig, DatapathEni } from "./types.ts";
import { podAttachment, secondaryEni, VETH_CFG } from "../../tests/helpers/datapath_node.ts";
import type { KernelView, NetnsView } from "./view.ts";

const ENI: DatapathEni = { ...secondaryEni("02:00:00:00:01:00"), routeTable: 101 };
const POD = podAttachment("c1", "/run/netns/p", ENI);
const cfg = (kind: DatapathConfig["kind"]): DatapathConfig => ({
  ...VETH_CFG,
  kind,
  nodeIps: ["10.0.0.10"],
});

/** The host and pod as a complete ADD of `kind` leaves them (an ENI on eth1, index 3). */
function intact(kind: DatapathConfig["kind"]): { view: KernelView; plan: Plan } {
  const eth1: Link = {
    index: 3,
    name: "eth1",
    mac: ENI.mac,
    mtu: 9001,
    up: true,
    operState: "UP",
  };
  const plan = planAttachment(cfg(kind), POD, {
    parentIndex: 3,
    nodeIps: ["10.0.0.10"],
    eniLinkName: "eth1",
  });
  const view: KernelView = {
    host: { links: [eth1], addresses: [], routes: [], rules: [], neighbours: [], sysctls: {} },
    pod: { links: [], addresses: [], routes: [], rules: [], neighbours: [], sysctls: {} },
  };
  let next = 10;
  for (const l of plan.links) {
    view[l.side]!.links.push({
      index: next++,
      name: l.name,
      kind: l.kind,
      mac: `aa:00:00:00:00:${next}`,
      mtu: l.mtu,
      up: true,
      operState: "UP",
      ipvlanMode: l.ipvlanMode,
      parentIndex: l.kind === "ipvlan" ? 3 : undefined,
    });
  }
  const side = (s: "host" | "pod"): NetnsView => view[s]!;
  const find = (s: "host" | "pod", name: string) => side(s).links.find((l) => l.name === name)!;
  // The veth ends name each other.
  const hostVeth = find("host", plan.hostVeth);
  const podEnd = plan.links.find((l) => l.side === "pod" && l.kind === "veth")!;
  hostVeth.parentIndex = find("pod", podEnd.name).index;
  for (const s of plan.steps) {
    if (s.op === "addr") {
      const [address, len] = s.cidr.split("/");
      side(s.side).addresses.push({
        index: find(s.side, s.link).index,
        family: 4,
        address,
        prefixLen: Number(len),
        scope: "universe",
      });
    } else if (s.op === "route") {
      const r = s.route;
      side(s.side).routes.push({
        dst: r.dst,
        family: 4,
        gateway: r.gateway,
        dev: find(s.side, r.dev).index,
        src: r.src,
        table: r.table,
        scope: r.scope,
      });
    } else if (s.op === "neigh") {
      side(s.side).neighbours.push({
        index: find(s.side, s.neigh.link).index,
        family: 4,
        ip: s.neigh.ip,
        mac: find(s.neigh.macOf.side, s.neigh.macOf.link).mac,
        state: "permanent",
      });
    } else if (s.op === "rule") {
      view.host.rules.push({ family: 4, ...s.rule });
    } else if (s.op === "sysctl") {
      side(s.side).sysctls![s.key] = s.value;
    }
  }
  return { view, plan };
}

const texts = (v: KernelView, kind: DatapathConfig["kind"]) =>
  comparePod(cfg(kind), POD, v).map((f) => f.text);

for (const kind of ["veth", "ipvlan-l2", "ipvlan-l3s"] as const) {
  Deno.test(`compare ${kind}: the view a complete ADD leaves has no finding`, () => {
    assert.deepEqual(texts(intact(kind).view, kind), []);
  });
}

Deno.test("compare ipvlan-l3s: the `from` rule must be bound to the ENI's link (oif)", () => {
  const { view } = intact("ipvlan-l3s");
  view.host.rules = view.host.rules.map((r) => ({ ...r, oif: undefined }));
  assert.deepEqual(texts(view, "ipvlan-l3s"), [
    "host: rule 2000: from 10.0.1.20/32 oif eth1 lookup 101 missing",
  ]);
});

Deno.test("compare: a route over another link, or of another scope, is wrong and says what it found", () => {
  const { view, plan } = intact("veth");
  const hostRoute = view.host.routes.find((r) => r.dst === "10.0.1.20/32")!;
  hostRoute.dev = 3;
  assert.deepEqual(texts(view, "veth"), [
    `host: route 10.0.1.20/32 dev ${plan.hostVeth} scope link table main is wrong: ` +
    "found 10.0.1.20/32 dev eth1",
  ]);
  hostRoute.dev = view.host.links.find((l) => l.name === plan.hostVeth)!.index;
  hostRoute.scope = "universe";
  assert.deepEqual(texts(view, "veth"), [
    `host: route 10.0.1.20/32 dev ${plan.hostVeth} scope link table main is wrong: ` +
    `found 10.0.1.20/32 dev ${plan.hostVeth} scope universe`,
  ]);
});

Deno.test("compare: a neighbour with another MAC, and a pod sysctl, are named", () => {
  const { view } = intact("ipvlan-l2");
  view.pod!.neighbours[0].mac = "aa:bb:cc:dd:ee:ff";
  const key = Object.keys(view.pod!.sysctls!)[0];
  view.pod!.sysctls![key] = "1";
  const found = comparePod(cfg("ipvlan-l2"), POD, view);
  const of = (kind: string) => found.filter((f) => f.kind === kind).map((f) => f.text);
  assert.equal(found.length, 2);
  assert.match(of("object")[0], /^pod: neighbour 169\.254\.1\.1 .* is wrong: aa:bb:cc:dd:ee:ff/);
  assert.deepEqual(of("sysctl"), [`pod: sysctl ${key} is 1, expected 0`]);
});

Deno.test("compare: without the pod's view only the host side is judged", () => {
  const { view } = intact("ipvlan-l3s");
  assert.deepEqual(texts({ host: view.host }, "ipvlan-l3s"), []);
  view.host.neighbours = [];
  assert.match(
    texts({ host: view.host }, "ipvlan-l3s").join(),
    /^host: neighbour 10\.0\.1\.20 .* missing$/,
  );
});

Deno.test("compare: the ENI's link missing is named once, by the pod; the ENI's own setup is judged", () => {
  const { view } = intact("veth");
  const gone = {
    ...view,
    host: { ...view.host, links: view.host.links.filter((l) => l.index !== 3) },
  };
  assert.ok(
    texts(gone, "veth").includes(
      "host: no link has MAC 02:00:00:00:01:00; is eni-01 attached to this instance?",
    ),
  );
  assert.deepEqual(compareEni(cfg("veth"), ENI, gone.host), []);
  view.host.sysctls!["net/ipv4/conf/eth1/proxy_arp"] = "0";
  assert.deepEqual(compareEni(cfg("veth"), ENI, view.host).map((f) => f.text), [
    "host: sysctl net/ipv4/conf/eth1/proxy_arp is 0, expected 1",
    "host: route 10.0.1.1/32 dev eth1 scope link table 101 missing",
    "host: route default via 10.0.1.1 dev eth1 table 101 missing",
    "host: route 10.0.1.0/24 dev eth1 scope link table 101 missing",
  ]);
});

Deno.test("compare: the sysctl keys a live CHECK reads are those the plan and the ENI need", () => {
  const keys = podSysctlKeys(cfg("ipvlan-l3s"), POD, intact("ipvlan-l3s").view.host);
  assert.deepEqual(keys.host, [
    "net.ipv4.ip_forward",
    "net/ipv4/conf/eth1/proxy_arp",
    "net/ipv4/neigh/eth1/proxy_delay",
  ]);
  assert.equal(keys.pod.length, 1);
  assert.match(keys.pod[0], /^net\.ipv4\.conf\.vpc[0-9a-f]{11}\.rp_filter$/);
});
