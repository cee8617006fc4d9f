import assert from "node:assert/strict";
import { eniTable, hostVethName, podTempName } from "./naming.ts";
import { DatapathInputError } from "./errors.ts";
import type { EniInfo } from "./types.ts";

Deno.test("hostVethName is deterministic, short and distinct per attachment", () => {
  const a = hostVethName("vpc", "c0ffee", "eth0");
  assert.equal(a, hostVethName("vpc", "c0ffee", "eth0"));
  assert.match(a, /^vpc[0-9a-f]{11}$/);
  assert.ok(new TextEncoder().encode(a).length <= 15);
  assert.notEqual(a, hostVethName("vpc", "c0ffee", "net1"));
  assert.notEqual(hostVethName("vpc", "ab", "ceth0"), hostVethName("vpc", "abc", "eth0"));
  assert.equal(hostVethName("abcd", "x", "eth0").length, 15);
  assert.notEqual(podTempName("c0ffee", "eth0"), podTempName("c0ffee", "net1"));
});

Deno.test("hostVethName: 10000 attachments, no two names equal", () => {
  const seen = new Set<string>();
  for (let i = 0; i < 10000; i++) seen.add(hostVethName("vpc", `container-${i}`, "eth0"));
  assert.equal(seen.size, 10000);
});

Deno.test("hostVethName refuses a prefix that would overflow 15 bytes", () => {
  assert.throws(() => hostVethName("vpcni", "c", "eth0"), DatapathInputError);
  assert.throws(() => hostVethName("", "c", "eth0"), /hostVethPrefix/);
  assert.throws(() => hostVethName("V-1", "c", "eth0"), /lower-case/);
});

Deno.test("eniTable: main for the primary, routeTable or 100 + device index otherwise", () => {
  const eni: EniInfo = {
    id: "eni-1",
    mac: "02:00:00:00:00:01",
    deviceIndex: 2,
    primary: false,
    subnetId: "subnet-1",
    subnetCidr: "10.0.2.0/24",
    gateway: "10.0.2.1",
    routeTable: 0,
  };
  assert.equal(eniTable(undefined), 254);
  assert.equal(eniTable({ ...eni, primary: true, deviceIndex: 0 }), 254);
  assert.equal(eniTable(eni), 102);
  assert.equal(eniTable({ ...eni, routeTable: 7 }), 7);
});
