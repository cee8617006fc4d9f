import assert from "node:assert/strict";
import { type ManagedEni, NodeState, warmShortfall } from "./node_state.ts";
import { configSchema } from "./config.ts";

function eni(id: string, deviceIndex: number, ips: string[]): ManagedEni {
  return {
    id,
    mac: "02:00:00:00:00:0" + deviceIndex,
    deviceIndex,
    subnetId: "subnet-a",
    subnetCidr: "10.0.0.0/24",
    pool: "default",
    primary: deviceIndex === 0,
    primaryIp: `10.0.0.${200 + deviceIndex}`,
    ips: new Set(ips),
    prefixes: [],
  };
}
const pod = (c: string) => ({ network: "net", containerId: c, ifName: "eth0" });

Deno.test("node state: take packs the lowest ENI and never hands out an address twice", () => {
  const s = new NodeState("i-1");
  s.enis.set("eni-b", eni("eni-b", 1, ["10.0.0.20", "10.0.0.21"]));
  s.enis.set("eni-a", eni("eni-a", 0, ["10.0.0.10"]));
  const a = s.take("default", 0, pod("a"))!;
  const b = s.take("default", 0, pod("b"))!;
  const c = s.take("default", 0, pod("c"))!;
  assert.equal(a.ip, "10.0.0.10");
  assert.deepEqual(new Set([a.ip, b.ip, c.ip]).size, 3);
  assert.equal(s.take("default", 0, pod("d")), undefined);
  assert.deepEqual(s.stats("default", 0), { enis: 2, total: 3, used: 3, cooling: 0, free: 0 });
});

Deno.test("node state: released addresses cool down before reuse", () => {
  const s = new NodeState("i-1");
  s.enis.set("eni-a", eni("eni-a", 0, ["10.0.0.10"]));
  const a = s.take("default", 1000, pod("a"))!;
  s.release("net/a/eth0", 1000, 30_000);
  assert.equal(s.take("default", 2000, pod("b")), undefined, "cooling is not available");
  assert.deepEqual(s.stats("default", 2000), { enis: 1, total: 1, used: 0, cooling: 1, free: 0 });
  assert.equal(s.nextCooldownEnd("default", 2000), 31_000);
  assert.equal(s.take("default", 31_000, pod("b"))!.ip, a.ip);
  const cp = s.toCheckpoint(31_000);
  assert.equal(cp.allocations.length, 1);
  assert.equal(cp.cooldowns.length, 0);
});

Deno.test("warm targets: shortfall and surplus", () => {
  const [p] =
    configSchema.parse({ pools: [{ name: "p", warmIps: 5, minimumIps: 20, warmEnis: 0 }] }).pools;
  // 14 per ENI; 10 held, 8 used, 0 cooling: wants max(20, 8 + 5) = 20 → 10 short.
  assert.deepEqual(warmShortfall(p, { enis: 1, total: 10, used: 8, cooling: 0, free: 2 }, 14), {
    wantFree: 5,
    shortfall: 10,
    surplus: 0,
  });
  // Cooling addresses are held but not available: they raise the target.
  assert.equal(
    warmShortfall(p, { enis: 2, total: 28, used: 20, cooling: 6, free: 2 }, 14).shortfall,
    3,
  );
  // 40 held, 2 used: wants 20; one warm batch (5) of slack is kept → surplus 15.
  assert.equal(
    warmShortfall(p, { enis: 3, total: 40, used: 2, cooling: 0, free: 38 }, 14).surplus,
    15,
  );
  const [e] = configSchema.parse({ pools: [{ name: "e" }] }).pools;
  assert.equal(
    warmShortfall(e, { enis: 1, total: 14, used: 3, cooling: 0, free: 11 }, 14).shortfall,
    3,
  );
});
