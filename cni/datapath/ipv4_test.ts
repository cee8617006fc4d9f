import assert from "node:assert/strict";
import { canonicalDst, cidrContains, formatIpv4, parseCidr, parseIpv4 } from "./ipv4.ts";

Deno.test("parseIpv4 accepts dotted quads and refuses everything else", () => {
  assert.equal(parseIpv4("10.0.1.23"), 0x0a000117);
  assert.equal(parseIpv4("255.255.255.255"), 0xffffffff);
  for (const bad of ["", "10.0.1", "10.0.1.256", "10.0.01.1", "1.2.3.4.5", "a.b.c.d", " 1.2.3.4"]) {
    assert.equal(parseIpv4(bad), undefined, bad);
  }
  assert.equal(formatIpv4(0xc0a80001), "192.168.0.1");
});

Deno.test("parseCidr and canonicalDst normalise prefixes", () => {
  assert.deepEqual(parseCidr("10.0.1.7/24"), { address: 0x0a000107, prefixLen: 24 });
  assert.deepEqual(parseCidr("10.0.1.7"), { address: 0x0a000107, prefixLen: 32 });
  assert.equal(parseCidr("10.0.1.7/33"), undefined);
  assert.equal(parseCidr("10.0.1.7/024"), undefined);
  assert.equal(canonicalDst("10.0.1.7/24"), "10.0.1.0/24");
  assert.equal(canonicalDst("0.0.0.0/0"), "default");
  assert.equal(canonicalDst("10.0.1.7"), "10.0.1.7/32");
  assert.ok(cidrContains(parseCidr("10.0.1.0/24")!, parseIpv4("10.0.1.200")!));
  assert.ok(!cidrContains(parseCidr("10.0.1.0/24")!, parseIpv4("10.0.2.1")!));
});
