import assert from "node:assert/strict";
import { describeRoute, describeRule, planAttachment, type Step } from "./plan.ts";
import type { DatapathConfig } from "./types.ts";
import { podAttachment, secondaryEni, VETH_CFG } from "../../tests/helpers/datapath_node.ts";

const ENI1 = secondaryEni("02:00:00:00:01:00");
const POD = podAttachment("c1", "/run/netns/p", ENI1);
const cfg = (kind: DatapathConfig["kind"]): DatapathConfig => ({
  ...VETH_CFG,
  kind,
  serviceCidrs: ["10.96.0.1/12"],
  nodeIps: ["10.0.0.10", "10.0.0.10"],
});
const rules = (steps: Step[]) =>
  steps.flatMap((s) => (s.op === "rule" ? [describeRule(s.rule)] : []));
const routes = (steps: Step[], side: "host" | "pod") =>
  steps.flatMap((s) => (s.op === "route" && s.side === side ? [describeRoute(s.route)] : []));

Deno.test("veth plan: /32 pod, link-local gateway with a neighbour, both rules off the primary", () => {
  const p = planAttachment(cfg("veth"), POD, { nodeIps: [] });
  assert.equal(p.table, 101);
  assert.equal(p.podCidr, "10.0.1.20/32");
  assert.deepEqual(p.steps.slice(0, 2).map((s) => s.op), ["veth", "rename"]);
  assert.deepEqual(routes(p.steps, "pod"), [
    "route 169.254.1.1/32 dev eth0 scope link table main",
    "route default via 169.254.1.1 dev eth0 table main",
  ]);
  assert.deepEqual(routes(p.steps, "host"), [
    `route 10.0.1.20/32 dev ${p.hostVeth} scope link table main`,
  ]);
  assert.deepEqual(rules(p.steps), [
    "rule 1000: to 10.0.1.20/32 lookup main",
    "rule 2000: from 10.0.1.20/32 lookup 101",
  ]);
  const neigh = p.steps.find((s) => s.op === "neigh");
  assert.deepEqual(neigh, {
    op: "neigh",
    side: "pod",
    neigh: { link: "eth0", ip: "169.254.1.1", macOf: { side: "host", link: p.hostVeth } },
  });
  // The host route comes last: an IP already routed on the host fails after everything else.
  assert.equal(p.steps.at(-1)?.op, "route");
});

Deno.test("veth plan: a pod of the primary ENI gets no `from` rule", () => {
  const primary = { ...ENI1, deviceIndex: 0, primary: true };
  const p = planAttachment(cfg("veth"), { ...POD, address: { ...POD.address, eni: primary } }, {
    nodeIps: [],
  });
  assert.equal(p.table, 254);
  assert.deepEqual(rules(p.steps), ["rule 1000: to 10.0.1.20/32 lookup main"]);
  const noEni = planAttachment(
    cfg("veth"),
    { ...POD, address: { ...POD.address, eni: undefined } },
    { nodeIps: [] },
  );
  assert.deepEqual(rules(noEni.steps), ["rule 1000: to 10.0.1.20/32 lookup main"]);
});

Deno.test("ipvlan plans: subnet prefix, node IPs and services over the unnumbered veth", () => {
  for (const kind of ["ipvlan-l2", "ipvlan-l3s"] as const) {
    const p = planAttachment(cfg(kind), POD, {
      parentIndex: 7,
      nodeIps: ["10.0.0.10", "10.0.0.10"],
      eniLinkName: "eth1",
    });
    const ipv = p.steps[0];
    assert.deepEqual(ipv, {
      op: "ipvlan",
      podName: p.podTemp,
      parentIndex: 7,
      mode: kind === "ipvlan-l2" ? "l2" : "l3s",
      mtu: 9001,
    });
    assert.equal(p.podCidr, "10.0.1.20/24");
    assert.deepEqual(routes(p.steps, "pod"), [
      "route default via 10.0.1.1 dev eth0 table main",
      `route 169.254.1.1/32 dev ${p.hostVeth} scope link table main`,
      `route 10.0.0.10/32 via 169.254.1.1 dev ${p.hostVeth} src 10.0.1.20 table main`,
      `route 10.96.0.0/12 via 169.254.1.1 dev ${p.hostVeth} src 10.0.1.20 table main`,
    ]);
    assert.deepEqual(
      rules(p.steps),
      kind === "ipvlan-l2" ? ["rule 1000: to 10.0.1.20/32 lookup main"] : [
        "rule 1000: to 10.0.1.20/32 lookup main",
        "rule 2000: from 10.0.1.20/32 oif eth1 lookup 101",
      ],
    );
    assert.ok(
      p.steps.some((s) =>
        s.op === "sysctl" && s.side === "pod" && s.key === `net.ipv4.conf.${p.hostVeth}.rp_filter`
      ),
    );
    assert.deepEqual(p.links.map((l) => `${l.side}:${l.name}:${l.kind}`), [
      `host:${p.hostVeth}:veth`,
      "pod:eth0:ipvlan",
      `pod:${p.hostVeth}:veth`,
    ]);
  }
});

Deno.test("ipvlan plan without a parent is a programming error", () => {
  assert.throws(() => planAttachment(cfg("ipvlan-l2"), POD, { nodeIps: [] }), /parent/);
});
