/**
 * doctor's egress check and its repair against a real netns: what the daemon would program is
 * found ok; a rule removed by hand is missing, one added by hand is stray; `datapath --fix`'s
 * part rebuilds the table, removes it once no pool SNATs, and never touches a table of the
 * same name that vpcni did not make.
 */
import assert from "node:assert/strict";
import { checkSnat, expectedEgress, fixSnat } from "../../doctor/snat.ts";
import type { Facts } from "../../doctor/facts.ts";
import { applyEgress } from "../../ipam/egress/apply.ts";
import type { EgressPlan } from "../../ipam/egress/plan.ts";
import { isRoot, withNetns } from "../helpers/netns.ts";
import { run, sh } from "../helpers/sh.ts";

const MAC = "02:00:0e:9e:00:01";

/**
 * The facts doctor's egress check reads (IMDS metadata, the config, the daemon's ENIs); the
 * rest of Facts is not looked at, so it is left out.
 */
function facts(snat: "node" | "none"): Facts {
  return {
    source: "checkpoint+kernel",
    notes: [],
    daemon: { reachable: false, healthy: false, ready: false, detail: "down" },
    config: {
      datapath: "veth",
      routeTableBase: 100,
      pools: [{ name: "default", subnets: "node", snat, snatExcludeCidrs: ["192.0.2.0/24"] }],
    },
    pools: [],
    enis: [],
    allocations: [],
    cooldowns: [],
    routedUnknown: [],
    metadata: {
      vpcCidrs: ["10.9.0.0/16"],
      primaryMac: MAC,
      enis: [{
        mac: MAC,
        deviceIndex: 0,
        networkCard: 0,
        eniId: "eni-01",
        subnetId: "subnet-01",
        subnetCidr: "10.9.0.0/24",
        localIpv4s: ["10.9.0.10"],
        ipv4Prefixes: [],
      }],
    },
  } as unknown as Facts;
}

Deno.test("doctor egress: ok as programmed; a removed rule is missing, an added one stray; --fix rebuilds, then removes the table once no pool SNATs", async () => {
  assert.ok(isRoot(), "needs root (network namespaces)");
  await withNetns(["ved"], async (ns) => {
    await sh(
      ["ip", "link", "add", "eth0", "address", MAC, "type", "veth", "peer", "name", "eth0p"],
      { netns: ns.name },
    );
    const plan = expectedEgress(facts("node"), ns.path) as EgressPlan;
    applyEgress(plan, ns.path);
    let c = checkSnat(facts("node"), ns.path);
    assert.equal(c.status, "ok", JSON.stringify(c));
    assert.match(c.found, /SNAT for default/);

    const listed = JSON.parse(
      await sh(["nft", "-j", "list", "chain", "ip", "vpcni", "postrouting"], { netns: ns.name }),
    );
    const handle = listed.nftables.find((o: { rule?: unknown }) => o.rule).rule.handle;
    await sh(["nft", "delete", "rule", "ip", "vpcni", "postrouting", "handle", String(handle)], {
      netns: ns.name,
    });
    await sh(["nft", "add", "rule", "ip", "vpcni", "output", "counter"], { netns: ns.name });
    c = checkSnat(facts("node"), ns.path);
    assert.equal(c.status, "fail");
    assert.deepEqual(
      c.details!.map((d) => d.replace(/ #[0-9a-f]{8}$/, "").replace(/rule \d+ /, "rule N ")),
      [
        "missing: rule in postrouting: pool default: SNAT to 10.9.0.10",
        "stray: rule in output: (rule N without a comment)",
      ],
    );
    assert.match(c.fix!, /vpcni doctor datapath --fix rebuilds it/);

    assert.match(fixSnat(facts("node"), ns.path)!, /rebuilt table ip vpcni \(1 missing, 1 stray\)/);
    assert.equal(checkSnat(facts("node"), ns.path).status, "ok");
    assert.equal(fixSnat(facts("node"), ns.path), undefined, "nothing left to fix");

    c = checkSnat(facts("none"), ns.path);
    assert.equal(c.status, "fail");
    assert.ok(c.details!.includes("stray: table ip vpcni"), JSON.stringify(c.details));
    assert.match(fixSnat(facts("none"), ns.path)!, /removed table ip vpcni: no pool SNATs/);
    const tables = await sh(["nft", "list", "tables"], { netns: ns.name });
    assert.equal(tables.trim(), "");
    const rules = await sh(["ip", "rule"], { netns: ns.name });
    assert.doesNotMatch(rules, /^1500:/m);
    assert.equal(checkSnat(facts("none"), ns.path).status, "ok");

    // A table of that name someone else made is reported and left alone.
    await sh(["nft", "add", "table", "ip", "vpcni"], { netns: ns.name });
    c = checkSnat(facts("node"), ns.path);
    assert.equal(c.status, "skip");
    assert.match(c.found, /exists that vpcni did not make/);
    assert.equal(fixSnat(facts("none"), ns.path), undefined);
    assert.throws(() => applyEgress(plan, ns.path), /vpcni will not touch it/);
    const still = await run(["nft", "list", "table", "ip", "vpcni"], { netns: ns.name });
    assert.equal(still.code, 0, "the foreign table is still there");
  });
});
