import assert from "node:assert/strict";
import { choosePool } from "./pool_choice.ts";
import { configSchema, subnetChoice } from "./config.ts";

const cfg = configSchema.parse({
  pools: [{ name: "a" }, { name: "b", subnets: { ids: ["subnet-0b"] } }],
});
const pools = new Map(cfg.pools.map((p) => [p.name, { name: p.name, choice: subnetChoice(p) }]));
const ctx = {
  cfg,
  az: "az1",
  primarySubnetId: "subnet-0a",
  subnets: [
    { id: "subnet-0a", cidr: "10.0.0.0/24", az: "az1", availableIps: 10, tags: {} },
    { id: "subnet-0b", cidr: "10.0.1.0/24", az: "az1", availableIps: 10, tags: {} },
  ],
};
const nameOf = (r: unknown) => (r as { name?: string }).name ?? JSON.stringify(r);
/** The refusal a choice gave (fails the test if it chose a pool). */
function refusal(r: unknown): { code: number; msg: string } {
  const e = r as { ok?: boolean; code: number; msg: string };
  assert.equal(e.ok, false, JSON.stringify(r));
  return e;
}

Deno.test("pool choice: the pod's vpcni.io/<pool> device picks the pool without annotation", () => {
  assert.equal(nameOf(choosePool(undefined, pools, ctx, ["b"])), "b");
  assert.equal(nameOf(choosePool(undefined, pools, ctx, [])), "a", "no device: default pool");
  assert.equal(nameOf(choosePool({ "vpcni.io/pool": "b" }, pools, ctx, ["b"])), "b");
  assert.equal(
    nameOf(choosePool({ "vpcni.io/subnet-selector": "subnet-0b" }, pools, ctx, ["b"])),
    "b",
    "a selector that picks the same pool agrees",
  );
});

Deno.test("pool choice: an annotation naming another pool than the device is code 7", () => {
  const r = refusal(choosePool({ "vpcni.io/pool": "a" }, pools, ctx, ["b"]));
  assert.equal(r.code, 7);
  assert.equal(
    r.msg,
    'annotation vpcni.io/pool="a" picks pool "a", but the pod requests resource vpcni.io/b',
  );
  const sel = refusal(choosePool({ "vpcni.io/subnet-selector": "node" }, pools, ctx, ["b"]));
  assert.ok(sel.code === 7 && /subnet-selector="node" picks pool "a"/.test(sel.msg), sel.msg);
  const unknown = refusal(choosePool({ "vpcni.io/pool": "zz" }, pools, ctx, ["b"]));
  assert.ok(unknown.code === 7 && /picks no pool/.test(unknown.msg), unknown.msg);
});

Deno.test("pool choice: a device of an unconfigured pool, or of two pools, is code 7", () => {
  const r = refusal(choosePool(undefined, pools, ctx, ["gone"]));
  assert.ok(r.code === 7 && /no pool "gone" is configured/.test(r.msg), r.msg);
  const two = refusal(choosePool(undefined, pools, ctx, ["a", "b"]));
  assert.ok(two.code === 7 && /vpcni.io\/a, vpcni.io\/b/.test(two.msg), two.msg);
});
