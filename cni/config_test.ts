import assert from "node:assert/strict";
import { CONFIG_DEFAULTS, decodeStdin, parseConfig } from "./config.ts";
import { CniError } from "./errors.ts";

function assertCni(fn: () => unknown, code: number, re: RegExp) {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof CniError, String(e));
    assert.equal(e.code, code, e.message);
    assert.match(e.message, re);
    return true;
  });
}

const minimal = { cniVersion: "1.1.0", name: "pods", type: "vpcni" };

Deno.test("a minimal main config gets the documented defaults", () => {
  const c = parseConfig(minimal);
  assert.equal(c.role, "main");
  if (c.role !== "main") return;
  assert.equal(c.datapath, CONFIG_DEFAULTS.datapath);
  assert.equal(c.mtu, 9001);
  assert.equal(c.hostVethPrefix, "vpc");
  // An ADD may wait for the pool to grow: its bound is the CRI's, not the other verbs'.
  assert.deepEqual(c.daemon, {
    socket: "/run/vpcni/ipam.sock",
    timeoutMs: 5000,
    addTimeoutMs: 120_000,
  });
  assert.equal(c.delegateIpam, undefined);
});

Deno.test("a full main config with delegation, capabilities and runtime fields", () => {
  const c = parseConfig({
    ...minimal,
    datapath: "veth",
    mtu: 1500,
    serviceCidrs: ["172.20.0.0/16"],
    nodeIps: ["10.0.0.10"],
    hostVethPrefix: "ab1",
    daemonSocket: "/tmp/x.sock",
    daemonTimeoutMs: 250,
    logFile: "/var/log/vpcni.log",
    logLevel: "debug",
    capabilities: { "io.kubernetes.cri.pod-annotations": true },
    runtimeConfig: { "io.kubernetes.cri.pod-annotations": { "vpcni.io/pool": "db" } },
    ipam: { type: "host-local", ranges: [[{ subnet: "10.9.0.0/24" }]] },
    args: { anything: ["goes"] },
    prevResult: { cniVersion: "1.1.0", ips: [{ address: "10.9.0.2/24" }] },
    "cni.dev/valid-attachments": [{ containerID: "c1", ifname: "eth0" }],
  });
  assert.equal(c.role, "main");
  if (c.role !== "main") return;
  assert.equal(c.datapath, "veth");
  // A configured bound is every verb's, ADD's too.
  assert.deepEqual(c.daemon, { socket: "/tmp/x.sock", timeoutMs: 250, addTimeoutMs: 250 });
  assert.deepEqual(c.delegateIpam, { type: "host-local" });
  assert.deepEqual(c.annotations, { "vpcni.io/pool": "db" });
  assert.deepEqual(c.validAttachments, [{ containerId: "c1", ifName: "eth0" }]);
  assert.equal(c.prevResult?.ips[0].address, "10.9.0.2/24");
});

Deno.test("ipam.type vpcni under another plugin is the IPAM role", () => {
  const c = parseConfig({
    cniVersion: "0.4.0",
    name: "pods",
    type: "ptp",
    ipMasq: true,
    mtu: 1400,
    ipam: { type: "vpcni", daemonSocket: "/tmp/d.sock", routes: [{ dst: "10.0.0.0/8" }] },
  });
  assert.equal(c.role, "ipam");
  if (c.role !== "ipam") return;
  assert.equal(c.daemon.socket, "/tmp/d.sock");
  assert.equal(c.daemon.addTimeoutMs, 120_000);
  assert.deepEqual(c.routes, [{ dst: "10.0.0.0/8" }]);
});

Deno.test("daemonTimeoutMs in the main plugin's ipam section bounds ADD too", () => {
  const c = parseConfig({
    ...minimal,
    daemonTimeoutMs: 900,
    ipam: { type: "vpcni", daemonTimeoutMs: 3000 },
  });
  assert.deepEqual(c.daemon, {
    socket: "/run/vpcni/ipam.sock",
    timeoutMs: 3000,
    addTimeoutMs: 3000,
  });
  const kept = parseConfig({ ...minimal, daemonTimeoutMs: 900, ipam: { type: "vpcni" } });
  assert.deepEqual(kept.daemon, {
    socket: "/run/vpcni/ipam.sock",
    timeoutMs: 900,
    addTimeoutMs: 900,
  });
});

const bad: [string, Record<string, unknown>, number, RegExp][] = [
  ["no cniVersion", { name: "p", type: "vpcni" }, 7, /cniVersion is required/],
  ["old cniVersion", { ...minimal, cniVersion: "0.2.0" }, 1, /incompatible CNI version "0\.2\.0"/],
  ["future cniVersion", { ...minimal, cniVersion: "2.0.0" }, 1, /2\.0\.0/],
  ["no name", { cniVersion: "1.0.0", type: "vpcni" }, 7, /name must be a string/],
  ["unknown datapath", { ...minimal, datapath: "macvlan" }, 7, /datapath must be one of/],
  ["mtu too big", { ...minimal, mtu: 65000 }, 7, /mtu must be ≤ 9001/],
  ["bad service CIDR", { ...minimal, serviceCidrs: ["10.0.0.0/33"] }, 7, /serviceCidrs\[0\]/],
  ["relative log file", { ...minimal, logFile: "vpcni.log" }, 7, /logFile/],
  ["long veth prefix", { ...minimal, hostVethPrefix: "vpcni" }, 7, /hostVethPrefix/],
  ["unknown field", { ...minimal, bridge: "cni0" }, 2, /unsupported field bridge="cni0"/],
  ["ipMasq", { ...minimal, ipMasq: true }, 2, /ipMasq=true/],
  [
    "unknown capability",
    { ...minimal, capabilities: { portMappings: true } },
    2,
    /capabilities\.portMappings/,
  ],
  ["ipam without type", { ...minimal, ipam: {} }, 7, /ipam\.type/],
  ["vpcni ipam typo", { ...minimal, ipam: { type: "vpcni", sockt: "/x" } }, 2, /ipam\.sockt/],
  ["foreign type", { ...minimal, type: "bridge" }, 7, /type is "bridge"/],
  [
    "annotations not strings",
    { ...minimal, runtimeConfig: { "io.kubernetes.cri.pod-annotations": { a: 1 } } },
    7,
    /pod-annotations\.a/,
  ],
  [
    "bad valid attachments",
    { ...minimal, "cni.dev/valid-attachments": [{ containerID: "c" }] },
    7,
    /valid-attachments\[0\]\.ifname/,
  ],
  [
    "bad prevResult",
    { ...minimal, prevResult: { cniVersion: "1.1.0", ips: [{}] } },
    7,
    /prevResult\.ips\[0\]\.address/,
  ],
];
for (const [name, raw, code, re] of bad) {
  Deno.test(`config: ${name} → code ${code}`, () => assertCni(() => parseConfig(raw), code, re));
}

Deno.test("stdin that is not a JSON object is code 6", () => {
  assertCni(() => decodeStdin("{nope"), 6, /not JSON/);
  assertCni(() => decodeStdin("[1]"), 6, /not a JSON object/);
});

// JSON.parse makes these own keys; an `in` check would find them on Object.prototype and
// take them for known fields.
for (const key of ["__proto__", "constructor", "toString", "hasOwnProperty"]) {
  Deno.test(`config: a top-level ${key} is an unsupported field (code 2)`, () => {
    const text = JSON.stringify(minimal).replace("{", `{"${key}":{"polluted":true},`);
    const msg = new RegExp(`unsupported field ${key}=\\{"polluted":true\\}`);
    assertCni(() => parseConfig(decodeStdin(text)), 2, msg);
    const ipam = JSON.stringify({ ...minimal, ipam: { type: "vpcni" } })
      .replace(`{"type":"vpcni"}`, `{"type":"vpcni","${key}":1}`);
    assertCni(() => parseConfig(decodeStdin(ipam)), 2, new RegExp(`ipam\\.${key}=1`));
  });
}
