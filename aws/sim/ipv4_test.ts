import assert from "node:assert/strict";
import {
  cidrContains,
  cidrOverlaps,
  cidrWithin,
  formatCidr,
  formatIp,
  parseCidr,
  parseIp,
} from "./ipv4.ts";

Deno.test("addresses round-trip and malformed ones are refused", () => {
  assert.equal(formatIp(parseIp("10.0.255.1")!), "10.0.255.1");
  assert.equal(parseIp("255.255.255.255"), 2 ** 32 - 1);
  for (const bad of ["10.0.0", "10.0.0.256", "01.2.3.4", "a.b.c.d", "1.2.3.4 "]) {
    assert.equal(parseIp(bad), undefined, bad);
  }
});

Deno.test("CIDRs need zero host bits; containment and overlap", () => {
  const vpc = parseCidr("10.0.0.0/16")!;
  const sub = parseCidr("10.0.16.0/20")!;
  assert.equal(formatCidr(sub), "10.0.16.0/20");
  assert.equal(sub.size, 4096);
  assert.equal(parseCidr("10.0.16.1/20"), undefined);
  assert.equal(parseCidr("10.0.0.0/33"), undefined);
  assert.ok(cidrWithin(sub, vpc));
  assert.ok(!cidrWithin(vpc, sub));
  assert.ok(cidrContains(sub, parseIp("10.0.31.255")!));
  assert.ok(!cidrContains(sub, parseIp("10.0.32.0")!));
  assert.ok(cidrOverlaps(vpc, sub));
  assert.ok(!cidrOverlaps(sub, parseCidr("10.0.32.0/20")!));
});
