import assert from "node:assert/strict";
import {
  type AllocationFact,
  analyseDatapath,
  type DatapathSettings,
  findOrphans,
  type PodAccounting,
} from "./datapath.ts";
import { describeFix } from "./datapath_fix.ts";
import type { NetnsSnapshot } from "./kernel.ts";
import { hostVethName } from "../cni/datapath/naming.ts";
import type { EniInfo } from "../proto/ipam.ts";

const settings: DatapathSettings = {
  kind: "veth",
  hostVethPrefix: "vpc",
  mtu: 9001,
  serviceCidrs: [],
};
const eni: EniInfo = {
  id: "eni-1",
  mac: "02:00:00:00:00:11",
  deviceIndex: 1,
  primary: false,
  subnetId: "subnet-1",
  subnetCidr: "10.0.1.0/24",
  gateway: "10.0.1.1",
  routeTable: 101,
};
const alloc: AllocationFact = {
  network: "vpcni",
  containerId: "c1",
  ifName: "eth0",
  ip: "10.0.1.5",
  eniId: "eni-1",
  pool: "default",
  eni,
};
const veth = hostVethName("vpc", "c1", "eth0");
/** The daemon answered, and holds nothing for unnamed pods. */
const known: PodAccounting = { allocationsKnown: true, routedUnknown: [] };

/** A host netns where ADD of `alloc` and the ENI's T(E) are complete. */
function healthyHost(): NetnsSnapshot {
  const link = (index: number, name: string, mac: string, kind?: string) => ({
    index,
    name,
    mac,
    kind,
    mtu: 9001,
    up: true,
    operState: "UP",
  });
  return {
    netns: "",
    links: [
      link(1, "lo", ""),
      link(2, "eth0", "02:00:00:00:00:01"),
      link(3, "eth1", eni.mac),
      link(4, veth, "aa:00:00:00:00:01", "veth"),
    ],
    addresses: [],
    routes: [
      { dst: "10.0.1.5/32", family: 4, dev: 4, table: 254, scope: "link" },
      { dst: "10.0.1.1/32", family: 4, dev: 3, table: 101, scope: "link" },
      { dst: "default", family: 4, dev: 3, gateway: "10.0.1.1", table: 101, scope: "universe" },
      { dst: "10.0.1.0/24", family: 4, dev: 3, table: 101, scope: "link" },
    ],
    rules: [
      { priority: 0, family: 4, table: 255 },
      { priority: 1000, family: 4, dst: "10.0.1.5/32", table: 254 },
      { priority: 2000, family: 4, src: "10.0.1.5/32", table: 101 },
      { priority: 32766, family: 4, table: 254 },
    ],
    neighbours: [],
  };
}

const sysctls = {
  "net.ipv4.ip_forward": "1",
  "net.ipv4.conf.all.rp_filter": "0",
  "net.ipv4.conf.eth1.rp_filter": "2",
};

Deno.test("a complete attachment has nothing missing and nothing orphaned", () => {
  const f = analyseDatapath(settings, [alloc], [eni], healthyHost(), new Map(), sysctls, known);
  assert.deepEqual(f.missing, []);
  assert.deepEqual(f.orphans, []);
  assert.deepEqual(f.sysctl, []);
});

Deno.test("each missing host object is named", () => {
  const host = healthyHost();
  host.rules = host.rules.filter((r) => r.priority !== 2000);
  host.routes = host.routes.filter((r) => !(r.table === 101 && r.dst === "default"));
  const f = analyseDatapath(settings, [alloc], [eni], host, new Map(), sysctls, known);
  assert.deepEqual(f.missing.map((m) => m.what), [
    "host: rule 2000: from 10.0.1.5/32 lookup 101 missing",
    "host: route default via 10.0.1.1 dev eth1 table 101 missing",
  ]);
});

Deno.test("orphans are only objects of vpcni's exact shape that nothing explains", () => {
  const host = healthyHost();
  host.rules.push(
    { priority: 1000, family: 4, dst: "10.0.1.9/32", table: 254 }, // ours, no allocation
    { priority: 1500, family: 4, dst: "10.0.1.9/32", table: 254 }, // not our priority
    { priority: 2000, family: 4, src: "10.0.1.0/24", table: 101 }, // not a /32
  );
  host.links.push(
    {
      index: 9,
      name: "vpc0123456789a",
      mac: "",
      kind: "veth",
      mtu: 1500,
      up: true,
      operState: "UP",
    },
    { index: 10, name: "vethabc", mac: "", kind: "veth", mtu: 1500, up: true, operState: "UP" },
  );
  host.routes.push(
    { dst: "default", family: 4, dev: 2, gateway: "10.0.0.1", table: 103, scope: "universe" },
    { dst: "10.0.0.0/8", family: 4, dev: 2, gateway: "10.0.0.1", table: 50, scope: "universe" },
  );
  const f = analyseDatapath(settings, [alloc], [eni], host, new Map(), sysctls, known);
  assert.deepEqual(f.orphans.map(describeFix), [
    "delete rule 1000: to 10.0.1.9/32 lookup main",
    "delete host veth vpc0123456789a (its routes go with it)",
    "flush route table 103 (1 routes)",
  ]);
});

Deno.test("forwarding off and strict rp_filter on a secondary ENI are reported", () => {
  const f = analyseDatapath(settings, [alloc], [eni], healthyHost(), new Map(), {
    "net.ipv4.ip_forward": "0",
    "net.ipv4.conf.all.rp_filter": "1",
    "net.ipv4.conf.eth1.rp_filter": "0",
  }, known);
  assert.equal(f.sysctl.length, 2);
  assert.match(f.sysctl[0], /^host: sysctl net\.ipv4\.ip_forward is 0, expected 1$/);
  assert.match(f.sysctl[1], /rp_filter on eth1 \(eni-1\) is strict \(all=1, eth1=0\)/);
});

Deno.test("ipvlan-l2: the host side is the unnumbered veth's /32 route, its neighbour and the rules", () => {
  const s: DatapathSettings = { ...settings, kind: "ipvlan-l2" };
  const host = healthyHost();
  host.neighbours.push({
    index: 4,
    family: 4,
    ip: "10.0.1.5",
    mac: "aa:00:00:00:00:02",
    state: "permanent",
  });
  assert.deepEqual(analyseDatapath(s, [alloc], [eni], host, new Map(), sysctls, known).missing, []);
  host.neighbours = [];
  assert.deepEqual(
    analyseDatapath(s, [alloc], [eni], host, new Map(), sysctls, known).missing.map((m) => m.what),
    [`host: neighbour 10.0.1.5 dev ${veth} (permanent, MAC of pod ${veth}) missing`],
  );
});

Deno.test("ipvlan-l3s: a `from` rule not bound to the ENI's link is reported, as CHECK does", () => {
  const s: DatapathSettings = { ...settings, kind: "ipvlan-l3s" };
  const host = healthyHost();
  host.neighbours.push({ index: 4, family: 4, ip: "10.0.1.5", state: "permanent" });
  // The snapshot's rule 2000 has no oif: l3s needs `from 10.0.1.5 oif eth1 lookup 101`.
  assert.deepEqual(
    analyseDatapath(s, [alloc], [eni], host, new Map(), sysctls, known).missing.map((m) => m.what),
    ["host: rule 2000: from 10.0.1.5/32 oif eth1 lookup 101 missing"],
  );
  host.rules = host.rules.map((r) => r.priority === 2000 ? { ...r, oif: "eth1" } : r);
  assert.deepEqual(analyseDatapath(s, [alloc], [eni], host, new Map(), sysctls, known).missing, []);
});

Deno.test("a host route over the wrong link is reported with the link it found", () => {
  const host = healthyHost();
  host.routes = host.routes.map((r) => r.dst === "10.0.1.5/32" ? { ...r, dev: 2 } : r);
  assert.deepEqual(
    analyseDatapath(settings, [alloc], [eni], host, new Map(), sysctls, known).missing
      .map((m) => m.what),
    [`host: route 10.0.1.5/32 dev ${veth} scope link table main is wrong: found 10.0.1.5/32 dev eth0`],
  );
});

/**
 * A running pod on 10.0.1.7 that no allocation names (its checkpoint was lost): both rules,
 * its host veth and the /32 route over it. And a leftover rule of a pod that is gone.
 */
function hostWithUnnamedPod(): NetnsSnapshot {
  const host = healthyHost();
  host.links.push({
    index: 8,
    name: hostVethName("vpc", "c-unnamed", "eth0"),
    mac: "aa:00:00:00:00:07",
    kind: "veth",
    mtu: 9001,
    up: true,
    operState: "UP",
  });
  host.routes.push({ dst: "10.0.1.7/32", family: 4, dev: 8, table: 254, scope: "link" });
  host.rules.push(
    { priority: 1000, family: 4, dst: "10.0.1.7/32", table: 254 },
    { priority: 2000, family: 4, src: "10.0.1.7/32", table: 101 },
    { priority: 1000, family: 4, dst: "10.0.1.9/32", table: 254 },
  );
  return host;
}

Deno.test("a pod the daemon holds as routed-unknown keeps its rules, veth and route", () => {
  const analyse = (accounting: PodAccounting) =>
    analyseDatapath(settings, [alloc], [eni], hostWithUnnamedPod(), new Map(), sysctls, accounting);
  const f = analyse({ allocationsKnown: true, routedUnknown: ["10.0.1.7"] });
  assert.deepEqual(f.orphans.map(describeFix), ["delete rule 1000: to 10.0.1.9/32 lookup main"]);
  assert.deepEqual(f.held, ["10.0.1.7"]);
  assert.deepEqual(f.unjudged, []);

  const unheld = analyse(known);
  assert.deepEqual(unheld.orphans.map(describeFix), [
    "delete rule 1000: to 10.0.1.7/32 lookup main",
    "delete rule 2000: from 10.0.1.7/32 lookup 101",
    "delete rule 1000: to 10.0.1.9/32 lookup main",
    `delete host veth ${hostVethName("vpc", "c-unnamed", "eth0")} (its routes go with it)`,
  ], "what the daemon does not hold is still an orphan");
});

Deno.test("allocations unknown: no pod's rule, route or veth is an orphan; tables still are", () => {
  const host = hostWithUnnamedPod();
  host.routes.push(
    { dst: "default", family: 4, dev: 2, gateway: "10.0.0.1", table: 103, scope: "universe" },
  );
  const unknown: PodAccounting = { allocationsKnown: false, routedUnknown: [] };
  // No daemon and no checkpoint: doctor knows no allocation at all.
  const orphans = findOrphans(settings, [], [eni], host, unknown);
  assert.deepEqual(orphans.map(describeFix), ["flush route table 103 (1 routes)"]);
  const f = analyseDatapath(settings, [], [eni], host, new Map(), sysctls, unknown);
  assert.ok(f.orphans.every((o) => o.kind === "table"), f.orphans.map((o) => o.text).join());
  assert.deepEqual(f.unjudged, ["10.0.1.5", "10.0.1.7", "10.0.1.9"]);
  assert.deepEqual(f.held, []);
});

Deno.test("the primary ENI's host setup is judged only once a pod is on it", () => {
  const primary: EniInfo = {
    ...eni,
    id: "eni-0",
    mac: "02:00:00:00:00:01",
    deviceIndex: 0,
    primary: true,
    routeTable: 254,
  };
  // ADD sets proxy ARP on the ENI of its pod: the primary has none here, so it is off.
  const off = { ...sysctls, "net/ipv4/conf/eth0/proxy_arp": "0" };
  const f = analyseDatapath(
    settings,
    [alloc],
    [primary, eni],
    healthyHost(),
    new Map(),
    off,
    known,
  );
  assert.deepEqual(f.sysctl, []);
  const onPrimary: AllocationFact = { ...alloc, eniId: "eni-0", eni: primary };
  const host = healthyHost();
  host.rules = host.rules.filter((r) => r.priority !== 2000);
  const g = analyseDatapath(settings, [onPrimary], [primary, eni], host, new Map(), off, known);
  assert.deepEqual(g.sysctl, ["host: sysctl net/ipv4/conf/eth0/proxy_arp is 0, expected 1"]);
});

Deno.test("a pod netns the daemon could not see is not reported gone when doctor cannot see it", () => {
  const gone = { ...alloc, netns: "/run/containerd/netns/cni-1" };
  const hidden = { ...gone, containerId: "c2", netnsHidden: true };
  const f = analyseDatapath(settings, [gone, hidden], [eni], healthyHost(), new Map(), sysctls, {
    ...known,
  });
  assert.deepEqual(f.goneNetns.map((a) => a.containerId), ["c1"]);
});
