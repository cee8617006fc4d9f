import assert from "node:assert/strict";
import { type CniResult, firstIpv4, formatResult, mergeDns, parseResult } from "./result.ts";
import { CniError } from "./errors.ts";

const model: CniResult = {
  interfaces: [
    { name: "vpc0123456789a", mac: "aa:bb:cc:dd:ee:01", mtu: 9001 },
    { name: "eth0", mac: "aa:bb:cc:dd:ee:02", mtu: 9001, sandbox: "/run/netns/p" },
  ],
  ips: [{ address: "10.0.1.23/32", gateway: "169.254.1.1", interface: 1 }],
  routes: [{ dst: "0.0.0.0/0", gw: "169.254.1.1", mtu: 9001, table: 254 }],
  dns: { nameservers: ["10.0.0.2"] },
};

Deno.test("formatResult 1.1.0 keeps interface mtu and route extras", () => {
  const out = formatResult(model, "1.1.0");
  assert.deepEqual(out, {
    cniVersion: "1.1.0",
    interfaces: [
      { name: "vpc0123456789a", mac: "aa:bb:cc:dd:ee:01", mtu: 9001 },
      { name: "eth0", mac: "aa:bb:cc:dd:ee:02", mtu: 9001, sandbox: "/run/netns/p" },
    ],
    ips: [{ address: "10.0.1.23/32", gateway: "169.254.1.1", interface: 1 }],
    routes: [{ dst: "0.0.0.0/0", gw: "169.254.1.1", mtu: 9001, table: 254 }],
    dns: { nameservers: ["10.0.0.2"] },
  });
});

Deno.test("formatResult 1.0.0 drops the 1.1 fields and has no ips[].version", () => {
  const out = formatResult(model, "1.0.0") as {
    interfaces: Record<string, unknown>[];
    ips: Record<string, unknown>[];
    routes: Record<string, unknown>[];
  };
  assert.equal(out.interfaces[0].mtu, undefined);
  assert.deepEqual(out.routes, [{ dst: "0.0.0.0/0", gw: "169.254.1.1" }]);
  assert.equal("version" in out.ips[0], false);
});

for (const v of ["0.3.0", "0.3.1", "0.4.0"]) {
  Deno.test(`formatResult ${v} adds ips[].version and keeps the interface index`, () => {
    const out = formatResult(
      { ...model, ips: [...model.ips, { address: "fd00::5/128", interface: 1 }] },
      v,
    ) as { ips: Record<string, unknown>[]; cniVersion: string };
    assert.equal(out.cniVersion, v);
    assert.deepEqual(out.ips, [
      { version: "4", address: "10.0.1.23/32", gateway: "169.254.1.1", interface: 1 },
      { version: "6", address: "fd00::5/128", interface: 1 },
    ]);
  });
}

Deno.test("formatResult for an IPAM plugin omits interfaces and indexes", () => {
  const out = formatResult(model, "0.4.0", { omitInterfaces: true });
  assert.equal("interfaces" in out, false);
  assert.deepEqual(out.ips, [{ version: "4", address: "10.0.1.23/32", gateway: "169.254.1.1" }]);
});

Deno.test("parseResult reads a 0.4.0 result and round-trips to 1.1.0", () => {
  const { cniVersion, result } = parseResult({
    cniVersion: "0.4.0",
    interfaces: [{ name: "eth0", mac: "aa:bb:cc:dd:ee:02", sandbox: "/run/netns/p" }],
    ips: [{ version: "4", address: "10.0.1.23/24", gateway: "10.0.1.1", interface: 0 }],
    routes: [{ dst: "0.0.0.0/0" }],
    dns: {},
  }, "prevResult");
  assert.equal(cniVersion, "0.4.0");
  assert.deepEqual(firstIpv4(result), { ip: "10.0.1.23", prefixLen: 24, gateway: "10.0.1.1" });
  assert.deepEqual(formatResult(result, "1.1.0"), {
    cniVersion: "1.1.0",
    interfaces: [{ name: "eth0", mac: "aa:bb:cc:dd:ee:02", sandbox: "/run/netns/p" }],
    ips: [{ address: "10.0.1.23/24", gateway: "10.0.1.1", interface: 0 }],
    routes: [{ dst: "0.0.0.0/0" }],
  });
});

const badResults: [string, unknown, number, RegExp][] = [
  ["not an object", "x", 7, /prevResult must be an object/],
  ["unsupported version", { cniVersion: "0.2.0" }, 1, /0\.2\.0/],
  [
    "bad address",
    { cniVersion: "1.0.0", ips: [{ address: "10.0.0.300/24" }] },
    7,
    /ips\[0\]\.address/,
  ],
  [
    "version vs family",
    { cniVersion: "0.3.1", ips: [{ version: "6", address: "10.0.0.3/24" }] },
    7,
    /version is "6"/,
  ],
  [
    "interface index out of range",
    { cniVersion: "1.0.0", interfaces: [], ips: [{ address: "10.0.0.3/24", interface: 2 }] },
    7,
    /interface 2 points past/,
  ],
];
for (const [name, value, code, re] of badResults) {
  Deno.test(`parseResult rejects ${name}`, () => {
    assert.throws(() => parseResult(value, "prevResult"), (e: unknown) => {
      assert.ok(e instanceof CniError);
      assert.equal(e.code, code);
      assert.match(e.message, re);
      return true;
    });
  });
}

Deno.test("mergeDns prefers the network config and falls back to IPAM", () => {
  assert.deepEqual(mergeDns({ search: ["a"] }, { nameservers: ["1.1.1.1"], search: ["b"] }), {
    nameservers: ["1.1.1.1"],
    search: ["a"],
  });
  assert.equal(mergeDns(undefined, {}), undefined);
});
