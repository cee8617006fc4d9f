import assert from "node:assert/strict";
import { formatIp, formatMac, parseCidr, parseIp, parseMac } from "./ip.ts";
import { InvalidInputError } from "./errors.ts";

Deno.test("IPv6 formats like inet_ntop (RFC 5952)", () => {
  const cases: [string, string][] = [
    ["fd00:0:0:0:0:0:0:1", "fd00::1"],
    ["0:0:0:0:0:0:0:0", "::"],
    ["0:0:0:0:0:0:0:1", "::1"],
    ["fe80:0:0:0:b45e:afff:fed9:7099", "fe80::b45e:afff:fed9:7099"],
    ["2001:db8:0:1:0:0:0:1", "2001:db8:0:1::1"],
    ["2001:0:0:1:0:0:0:1", "2001:0:0:1::1"],
    ["2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"],
    ["::ffff:10.1.2.3", "::ffff:10.1.2.3"],
    ["FD00::ABCD", "fd00::abcd"],
  ];
  for (const [input, want] of cases) assert.equal(formatIp(parseIp(input).bytes), want, input);
});

Deno.test("IPv4 and CIDR parsing is strict", () => {
  assert.deepEqual(parseCidr("10.0.0.5/32"), {
    family: 4,
    bytes: new Uint8Array([10, 0, 0, 5]),
    prefixLen: 32,
  });
  assert.equal(parseCidr("fd00::/8").prefixLen, 8);
  assert.equal(parseCidr("10.0.0.5", true).prefixLen, 32);
  assert.equal(parseCidr("fd00::5", true).prefixLen, 128);
  for (const bad of ["10.0.0.256/32", "10.0.0/24", "10.0.0.1/33", "01.2.3.4/8", "fd00::/129"]) {
    assert.throws(() => parseCidr(bad), InvalidInputError, bad);
  }
  assert.throws(() => parseCidr("10.0.0.1"), /expected address\/prefix/);
  for (const bad of ["1::2::3", "12345::", "1:2:3:4:5:6:7:8:9", "fd00::1.2.3", "x", ""]) {
    assert.throws(() => parseIp(bad), InvalidInputError, bad);
  }
});

Deno.test("MAC addresses parse case-insensitively and format lower-case", () => {
  assert.equal(formatMac(parseMac("02:AB:cd:00:00:0F")), "02:ab:cd:00:00:0f");
  for (const bad of ["02:ab:cd:00:00", "02-ab-cd-00-00-0f", "02:ab:cd:00:00:0g"]) {
    assert.throws(() => parseMac(bad), /invalid MAC address/, bad);
  }
});
