/**
 * The daemon's egress keeper against a real netns: each sync (start, IMDS check, EC2 re-sync)
 * builds the ruleset from the configuration and the subnets the pools match, puts back what
 * was removed by hand, removes it when no pool SNATs, and programs nothing where the primary
 * ENI's link is absent (not the node's network); an update marks a new ENI as soon as its link
 * is there, and says which ENIs still wait for theirs.
 */
import assert from "node:assert/strict";
import { resolveConfig } from "../../ipam/config.ts";
import { EgressKeeper } from "../../ipam/egress/keeper.ts";
import type { SubnetInfo } from "../../ipam/cloud.ts";
import type { ManagedEni } from "../../ipam/node_state.ts";
import { isRoot, withNetns } from "../helpers/netns.ts";
import { run, sh } from "../helpers/sh.ts";

const MAC = "02:00:0e:9e:00:02";
const subnets: SubnetInfo[] = [
  { id: "subnet-0a", cidr: "10.9.0.0/24", az: "az-1", availableIps: 200, tags: {} },
  { id: "subnet-0b", cidr: "10.9.16.0/20", az: "az-1", availableIps: 200, tags: { zone: "pub" } },
  { id: "subnet-0c", cidr: "10.9.32.0/20", az: "az-2", availableIps: 200, tags: { zone: "pub" } },
];

function keeper(
  netnsPath: string,
  snat: "node" | "none",
  mac = MAC,
  enis: () => Iterable<ManagedEni> = () => [],
): EgressKeeper {
  const cfg = resolveConfig(
    {
      datapath: "veth",
      pools: [{
        name: "pub",
        subnets: { tags: "zone=pub" },
        snat,
        snatExcludeCidrs: ["192.0.2.0/24"],
      }],
    },
    {},
    {},
  );
  return new EgressKeeper({
    cfg,
    primary: { mac, localIpv4s: ["10.9.0.10"], subnetId: "subnet-0a" },
    vpcCidrs: ["10.9.0.0/16"],
    az: "az-1",
    subnets,
    enis,
    netnsPath,
  });
}

async function table(ns: string): Promise<string> {
  return (await run(["nft", "list", "table", "ip", "vpcni"], { netns: ns })).stdout;
}

Deno.test("egress keeper: builds from the pools' subnets, repairs a hand edit on the next sync, removes once no pool SNATs", async () => {
  assert.ok(isRoot(), "needs root (network namespaces)");
  await withNetns(["vek"], async (ns) => {
    await sh(["ip", "link", "add", "eth0", "address", MAC, "type", "veth", "peer", "name", "e0p"], {
      netns: ns.name,
    });
    keeper(ns.path, "node").sync();
    let t = await table(ns.name);
    assert.match(
      t,
      /set src-pub \{[^}]*elements = \{ 10\.9\.16\.0\/20 \}/s,
      "only the AZ's subnet",
    );
    assert.match(t, /set skip-pub \{[^}]*elements = \{ 192\.0\.2\.0\/24 \}/s);
    assert.match(t, /snat to 10\.9\.0\.10 fully-random/);

    await sh(["nft", "delete", "chain", "ip", "vpcni", "postrouting"], { netns: ns.name });
    await sh(["ip", "rule", "del", "priority", "1500"], { netns: ns.name });
    keeper(ns.path, "node").sync();
    t = await table(ns.name);
    assert.match(t, /snat to 10\.9\.0\.10 fully-random/, "the next sync puts it back");
    assert.match(
      await sh(["ip", "rule"], { netns: ns.name }),
      /^1500:.*fwmark 0x10000\/0xff0000 lookup main/m,
    );

    keeper(ns.path, "none").sync();
    assert.equal(await table(ns.name), "");
    assert.doesNotMatch(await sh(["ip", "rule"], { netns: ns.name }), /^1500:/m);
  });
});

Deno.test("egress keeper: where the primary ENI has no link, nothing is programmed", async () => {
  assert.ok(isRoot(), "needs root (network namespaces)");
  await withNetns(["vek"], async (ns) => {
    keeper(ns.path, "node", "02:00:0e:9e:00:99").sync();
    assert.equal((await sh(["nft", "list", "tables"], { netns: ns.name })).trim(), "");
    assert.doesNotMatch(await sh(["ip", "rule"], { netns: ns.name }), /^1500:/m);
  });
});

Deno.test("egress keeper: an update marks an ENI once its link is there, and names those still waiting", async () => {
  assert.ok(isRoot(), "needs root (network namespaces)");
  await withNetns(["vek"], async (ns) => {
    const veth = (name: string, mac: string) =>
      sh(["ip", "link", "add", name, "address", mac, "type", "veth", "peer", "name", `${name}p`], {
        netns: ns.name,
      });
    await veth("eth0", MAC);
    const eni: ManagedEni = {
      id: "eni-2",
      mac: "02:00:0e:9e:00:22",
      deviceIndex: 2,
      subnetId: "subnet-0b",
      subnetCidr: "10.9.16.0/20",
      pool: "pub",
      primary: false,
      primaryIp: "10.9.16.4",
      ips: new Set(),
      prefixes: [],
    };
    const held: ManagedEni[] = [];
    const k = keeper(ns.path, "node", MAC, () => held);
    assert.deepEqual(k.sync(), { applied: true, waiting: [] });
    held.push(eni); // attached: EC2 says so, the node has no link for it yet
    assert.deepEqual(k.update(), { applied: true, waiting: ["eni-2"] });
    assert.equal(k.covers("eni-2"), false, "a pod on it would wait");
    const rules = () => sh(["ip", "rule"], { netns: ns.name });
    assert.doesNotMatch(await rules(), /fwmark 0x30000/);
    await veth("eth2", eni.mac);
    assert.deepEqual(k.update(), { applied: true, waiting: [] });
    assert.equal(k.covers("eni-2"), true);
    assert.match(await rules(), /^1500:\s+from all fwmark 0x30000\/0xff0000 lookup 102$/m);
    assert.match(await table(ns.name), /entered through ENI #2 /);
  });
});
