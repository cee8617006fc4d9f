import assert from "node:assert/strict";
import { type EniRow, enisTable } from "./views.ts";

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
