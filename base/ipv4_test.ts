import assert from "node:assert/strict";
import {
  canonicalDst,
  cidrAddresses,
  cidrContains,
  cidrNetwork,
  cidrOverlaps,
  cidrSize,
  cidrWithin,
  formatIpv4,
  formatIpv4Cidr,
  isIpv4,
  parseIpv4,
  parseIpv4Cidr,
  parseIpv4Network,
  prefixMask,
} from "./ipv4.ts";

Deno.test("parseIpv4 accepts dotted quads and refuses everything else", () => {
  assert.equal(parseIpv4("10.0.1.23"), 0x0a000117);
  assert.equal(parseIpv4("255.255.255.255"), 0xffffffff);
  assert.equal(parseIpv4("255.255.255.255"), 2 ** 32 - 1);
  assert.equal(parseIpv4("0.0.0.0"), 0);
  const bad = [
    ...["", "10.0.1", "10.0.1.256", "10.0.01.1", "1.2.3.4.5", "a.b.c.d", " 1.2.3.4"],
    ...["10.0.0", "10.0.0.256", "01.2.3.4", "1.2.3.4 ", "1.2.3.4\n", "1..2.3", "+1.2.3.4"],
  ];
  for (const text of bad) {
    assert.equal(parseIpv4(text), undefined, text);
    assert.equal(isIpv4(text), false, text);
  }
  assert.ok(isIpv4("10.0.255.1"));
});

Deno.test("formatIpv4 writes dotted quads and round-trips parseIpv4", () => {
  assert.equal(formatIpv4(0xc0a80001), "192.168.0.1");
  assert.equal(formatIpv4(parseIpv4("10.0.255.1")!), "10.0.255.1");
  assert.equal(formatIpv4(0), "0.0.0.0");
  assert.equal(formatIpv4(0xffffffff), "255.255.255.255");
});

Deno.test("parseIpv4Cidr keeps the address as written; a bare address is a /32", () => {
  assert.deepEqual(parseIpv4Cidr("10.0.1.7/24"), { address: 0x0a000107, prefixLen: 24 });
  assert.deepEqual(parseIpv4Cidr("10.0.1.7"), { address: 0x0a000107, prefixLen: 32 });
  assert.deepEqual(parseIpv4Cidr("0.0.0.0/0"), { address: 0, prefixLen: 0 });
  for (const bad of ["10.0.1.7/33", "10.0.1.7/024", "10.0.1.7/08", "10.0.1.7/", "10.0.1/24"]) {
    assert.equal(parseIpv4Cidr(bad), undefined, bad);
  }
  assert.equal(formatIpv4Cidr(parseIpv4Cidr("10.0.1.7/24")!), "10.0.1.7/24");
});

Deno.test("parseIpv4Network needs a length and zero host bits", () => {
  const sub = parseIpv4Network("10.0.16.0/20")!;
  assert.deepEqual(sub, { address: 0x0a001000, prefixLen: 20 });
  assert.equal(formatIpv4Cidr(sub), "10.0.16.0/20");
  assert.equal(cidrSize(sub), 4096);
  assert.equal(parseIpv4Network("10.0.16.1/20"), undefined);
  assert.equal(parseIpv4Network("10.0.0.0/33"), undefined);
  assert.equal(parseIpv4Network("10.0.0.0/100"), undefined);
  assert.equal(parseIpv4Network("10.0.0.0"), undefined);
  assert.equal(parseIpv4Network("10.0.0.0/"), undefined);
  assert.equal(parseIpv4Network("01.0.0.0/8"), undefined);
  assert.deepEqual(parseIpv4Network("0.0.0.0/0"), { address: 0, prefixLen: 0 });
  assert.deepEqual(parseIpv4Network("10.0.0.7/32"), { address: 0x0a000007, prefixLen: 32 });
  assert.deepEqual(parseIpv4Network("10.0.0.0/08"), { address: 0x0a000000, prefixLen: 8 });
});

Deno.test("prefixMask, cidrNetwork and cidrSize", () => {
  assert.equal(prefixMask(0), 0);
  assert.equal(prefixMask(24), 0xffffff00);
  assert.equal(prefixMask(32), 0xffffffff);
  assert.deepEqual(cidrNetwork(parseIpv4Cidr("10.0.1.7/24")!), parseIpv4Network("10.0.1.0/24"));
  assert.deepEqual(cidrNetwork(parseIpv4Cidr("255.255.255.255/1")!), {
    address: 0x80000000,
    prefixLen: 1,
  });
  assert.equal(cidrSize(parseIpv4Cidr("10.0.1.7")!), 1);
  assert.equal(cidrSize(parseIpv4Cidr("0.0.0.0/0")!), 2 ** 32);
});

Deno.test("containment, nesting and overlap of blocks", () => {
  const vpc = parseIpv4Network("10.0.0.0/16")!;
  const sub = parseIpv4Network("10.0.16.0/20")!;
  assert.ok(cidrWithin(sub, vpc));
  assert.ok(!cidrWithin(vpc, sub));
  assert.ok(cidrWithin(sub, sub));
  assert.ok(cidrContains(sub, parseIpv4("10.0.31.255")!));
  assert.ok(!cidrContains(sub, parseIpv4("10.0.32.0")!));
  assert.ok(!cidrContains(sub, parseIpv4("10.0.15.255")!));
  assert.ok(cidrOverlaps(vpc, sub));
  assert.ok(cidrOverlaps(sub, vpc));
  assert.ok(!cidrOverlaps(sub, parseIpv4Network("10.0.32.0/20")!));
  assert.ok(cidrContains(parseIpv4Cidr("10.0.1.0/24")!, parseIpv4("10.0.1.200")!));
  assert.ok(!cidrContains(parseIpv4Cidr("10.0.1.0/24")!, parseIpv4("10.0.2.1")!));
  // A CIDR written with host bits stands for its whole network block.
  assert.ok(cidrContains(parseIpv4Cidr("10.0.1.7/24")!, parseIpv4("10.0.1.200")!));
  assert.ok(cidrWithin(parseIpv4Cidr("10.0.17.9/24")!, sub));
  assert.ok(cidrOverlaps(parseIpv4Cidr("10.0.1.7/24")!, parseIpv4Cidr("10.0.1.9")!));
  const all = parseIpv4Network("0.0.0.0/0")!;
  assert.ok(cidrContains(all, 0xffffffff));
  assert.ok(cidrWithin(vpc, all));
  assert.ok(cidrOverlaps(all, sub));
});

Deno.test("cidrAddresses lists a block from its network address up", () => {
  const p = cidrAddresses(parseIpv4Network("10.0.1.32/28")!).map(formatIpv4);
  assert.equal(p.length, 16);
  assert.equal(p[0], "10.0.1.32");
  assert.equal(p[15], "10.0.1.47");
  assert.deepEqual(cidrAddresses(parseIpv4Cidr("10.0.1.35/30")!).map(formatIpv4), [
    "10.0.1.32",
    "10.0.1.33",
    "10.0.1.34",
    "10.0.1.35",
  ]);
  assert.deepEqual(cidrAddresses(parseIpv4Cidr("255.255.255.255")!), [0xffffffff]);
});

Deno.test("canonicalDst matches how netlink reports route destinations", () => {
  assert.equal(canonicalDst("10.0.1.7/24"), "10.0.1.0/24");
  assert.equal(canonicalDst("0.0.0.0/0"), "default");
  assert.equal(canonicalDst("10.1.2.3/0"), "default");
  assert.equal(canonicalDst("default"), "default");
  assert.equal(canonicalDst("10.0.1.7"), "10.0.1.7/32");
  assert.equal(canonicalDst("fd00::/8"), "fd00::/8");
});
