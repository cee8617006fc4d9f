import assert from "node:assert/strict";
import { type EniRow, eniRows, enisTable } from "./views.ts";
import { defaultConfig, type Facts } from "./facts.ts";

const row = (i: number, sgs: string[]): EniRow => ({
  eni: `eni-0a1b2c3d4e5f6000${i}`,
  device: i,
  subnet: `subnet-0a1b2c3d4e5f6000${i}`,
  pool: "internal",
  securityGroups: sgs,
  used: 3,
  free: 11,
  cooling: 1,
});

Deno.test("doctor enis never cuts ENI or subnet ids; security groups move below", () => {
  const rows = [
    row(0, ["sg-0a1b2c3d4e5f60001"]),
    row(1, ["sg-0a1b2c3d4e5f60001", "sg-0a1b2c3d4e5f60002"]),
  ];
  const text = enisTable(rows);
  for (const l of text.split("\n")) assert.ok(l.length <= 80, `${l.length}: ${l}`);
  for (const r of rows) {
    assert.ok(text.includes(r.subnet), `full ${r.subnet} in:\n${text}`);
    assert.ok(text.includes(r.eni));
  }
  assert.match(
    text,
    /eni-0a1b2c3d4e5f60001 security groups: sg-0a1b2c3d4e5f60001,sg-0a1b2c3d4e5f60002/,
  );
  assert.doesNotMatch(text, /…/);
});

Deno.test("doctor enis keeps the SGS column when it fits", () => {
  const text = enisTable([{ ...row(0, ["sg-1"]), eni: "eni-1", subnet: "subnet-1" }]);
  assert.match(text.split("\n")[0], /^ENI\s+DEV\s+SUBNET\s+POOL\s+SGS\s+USED/);
  assert.doesNotMatch(text, /security groups:/);
});

Deno.test("doctor enis counts addresses held for unnamed pods as used, not free", () => {
  const facts: Facts = {
    source: "daemon",
    notes: [],
    daemon: { reachable: true, healthy: true, ready: true, detail: "ok" },
    config: defaultConfig(),
    pools: [],
    enis: [{
      id: "eni-1",
      mac: "0a:00:00:00:00:01",
      deviceIndex: 1,
      subnetId: "subnet-1",
      subnetCidr: "10.0.1.0/24",
      pool: "default",
      ips: ["10.0.1.5", "10.0.1.6", "10.0.1.7", "10.0.1.8"],
    }],
    allocations: [],
    cooldowns: [{ ip: "10.0.1.8", eniId: "eni-1", until: Date.now() + 60_000 }],
    routedUnknown: ["10.0.1.5", "10.0.1.6"],
  };
  const [r] = eniRows(facts);
  assert.deepEqual([r.used, r.free, r.cooling], [2, 1, 1]);
});
