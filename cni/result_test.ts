import assert from "node:assert/strict";
import {
  type CniResult,
  firstIpv4,
  formatResult,
  mergeDns,
  mergeResults,
  parseResult,
} from "./result.ts";
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

// A chain's earlier result: loopback's interface and addresses, a route and DNS.
const earlier: CniResult = {
  interfaces: [{ name: "lo", mac: "00:00:00:00:00:00", sandbox: "/run/netns/p" }],
  ips: [{ address: "127.0.0.1/8", interface: 0 }, { address: "::1/128", interface: 0 }],
  routes: [{ dst: "10.96.0.0/12" }],
  dns: { nameservers: ["10.0.0.2"], search: ["svc.local"] },
};

Deno.test("mergeResults without a prevResult is the plugin's own result", () => {
  assert.deepEqual(mergeResults(undefined, model), model);
});

for (const v of ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]) {
  Deno.test(`mergeResults ${v}: earlier plugins' entries first, own indexes re-based`, () => {
    const prev = parseResult({ cniVersion: v, ...formatResult(earlier, v) }, "prevResult");
    const own: CniResult = { ...model, dns: { domain: "pods.local", search: ["own.local"] } };
    const out = formatResult(mergeResults(prev.result, own), v) as {
      interfaces: { name: string }[];
      ips: { address: string; interface?: number }[];
      routes: { dst: string }[];
      dns: Record<string, unknown>;
    };
    assert.deepEqual(out.interfaces.map((i) => i.name), ["lo", "vpc0123456789a", "eth0"]);
    assert.deepEqual(out.ips.map((ip) => [ip.address, ip.interface]), [
      ["127.0.0.1/8", 0],
      ["::1/128", 0],
      ["10.0.1.23/32", 2],
    ]);
    assert.equal(out.interfaces[out.ips[2].interface!].name, "eth0");
    assert.deepEqual(out.routes.map((r) => r.dst), ["10.96.0.0/12", "0.0.0.0/0"]);
    // Fields the plugin sets win; the rest come through from the chain.
    assert.deepEqual(out.dns, {
      nameservers: ["10.0.0.2"],
      domain: "pods.local",
      search: ["own.local"],
    });
  });
}

Deno.test("mergeResults keeps an address without an interface index as it is", () => {
  const out = mergeResults(earlier, {
    interfaces: [],
    ips: [{ address: "10.0.1.5/24" }],
    routes: [],
  });
  assert.deepEqual(out.ips[2], { address: "10.0.1.5/24" });
});

Deno.test('parseResult accepts the "version": "" libcni writes for an unversioned 0.x address', () => {
  const { result } = parseResult({
    cniVersion: "0.4.0",
    interfaces: [{ name: "lo" }],
    ips: [{ version: "", address: "127.0.0.1/8", interface: 0 }],
  }, "prevResult");
  assert.deepEqual(result.ips, [{ address: "127.0.0.1/8", interface: 0 }]);
});
