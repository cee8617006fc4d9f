/**
 * The egress plan as the daemon computes it from its facts: what is SNATed, what is marked,
 * and that a changed fact changes the rule it feeds (so a re-sync notices and replaces it).
 */
import assert from "node:assert/strict";
import { EGRESS_RULE_PRIORITY, type EgressFacts, planEgress } from "../../ipam/egress/plan.ts";

const facts: EgressFacts = {
  nodeIp: "10.0.0.10",
  vpcCidrs: ["10.0.0.0/16", "100.64.0.0/16"],
  enis: [
    { deviceIndex: 0, ifindex: 2, table: 254 },
    { deviceIndex: 1, ifindex: 3, table: 101 },
    { deviceIndex: 2, table: 102 }, // no link found: not marked
  ],
  pools: [
    {
      name: "pub",
      snat: "node",
      excludeCidrs: ["192.168.0.0/16"],
      randomFully: true,
      sourceCidrs: ["10.0.16.0/20"],
    },
    {
      name: "priv",
      snat: "none",
      excludeCidrs: [],
      randomFully: true,
      sourceCidrs: ["10.0.32.0/20"],
    },
  ],
};

Deno.test("egress plan: sets per SNATing pool, one SNAT rule per pool, marks per ENI with a link, and rules at 1500", () => {
  const p = planEgress(facts);
  assert.deepEqual(p.sets.map((s) => [s.name, s.cidrs]), [
    ["vpc", ["10.0.0.0/16", "100.64.0.0/16"]],
    ["src-pub", ["10.0.16.0/20"]],
    ["skip-pub", ["192.168.0.0/16"]],
  ]);
  assert.deepEqual(p.chains.map((c) => [c.name, c.hook?.type, c.hook?.priority]), [
    ["prerouting", "filter", -90],
    ["output", "route", -90],
    ["postrouting", "nat", 100],
  ]);
  const comments = p.rules.map((r) => `${r.chain}: ${r.comment!.replace(/ #[0-9a-f]{8}$/, "")}`);
  assert.deepEqual(comments, [
    "prerouting: connection of ENI #0: mark the packet",
    "prerouting: connection of ENI #1: mark the packet",
    "prerouting: entered through ENI #0",
    "prerouting: entered through ENI #1",
    "prerouting: pool pub: out via the primary ENI",
    "output: connection of ENI #0: mark the packet",
    "output: connection of ENI #1: mark the packet",
    "output: pool pub: out via the primary ENI",
    "postrouting: pool pub: SNAT to 10.0.0.10",
  ]);
  assert.deepEqual(p.ipRules, [
    { priority: EGRESS_RULE_PRIORITY, fwmark: 0x10000, fwmask: 0xff0000, table: 254 },
    { priority: EGRESS_RULE_PRIORITY, fwmark: 0x20000, fwmask: 0xff0000, table: 101 },
  ]);
});

Deno.test("egress plan: nothing at all when no pool SNATs; a new node address or port choice is a different rule", () => {
  const none = planEgress({
    ...facts,
    pools: facts.pools.map((p) => ({ ...p, snat: "none" as const })),
  });
  assert.deepEqual(none, { sets: [], chains: [], rules: [], ipRules: [] });
  const snatComment = (f: EgressFacts) => planEgress(f).rules.at(-1)!.comment;
  assert.equal(snatComment(facts), snatComment(structuredClone(facts)), "stable for equal facts");
  assert.notEqual(snatComment(facts), snatComment({ ...facts, nodeIp: "10.0.0.11" }));
  assert.notEqual(
    snatComment(facts),
    snatComment({ ...facts, pools: facts.pools.map((p) => ({ ...p, randomFully: false })) }),
  );
});
