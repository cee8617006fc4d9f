import assert from "node:assert/strict";
import { parseConfig } from "./config.ts";
import { checkStdinSize, INPUT_BOUNDS } from "./bounds.ts";
import { CniError } from "./errors.ts";

function refused(fn: () => unknown, re: RegExp) {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof CniError, String(e));
    assert.equal(e.code, 7, e.message);
    assert.match(e.message, re);
    return true;
  });
}

const main = { cniVersion: "1.1.0", name: "pods", type: "vpcni" };
const ipamRole = { cniVersion: "1.1.0", name: "pods", type: "ptp", ipam: { type: "vpcni" } };
const ip = (i: number) => ({ address: `10.0.${i >> 8 & 255}.${i & 255}/32` });

Deno.test("stdin beyond 1 MiB is refused naming the bound", () => {
  checkStdinSize(INPUT_BOUNDS.stdinBytes);
  refused(() => checkStdinSize(INPUT_BOUNDS.stdinBytes + 1), /more than 1048576 bytes/);
});

Deno.test("prevResult lists are bounded in both roles", () => {
  for (const base of [main, ipamRole]) {
    const prev = (over: Record<string, unknown>) => ({
      ...base,
      prevResult: { cniVersion: "1.1.0", ips: [], ...over },
    });
    parseConfig(prev({ ips: Array.from({ length: 64 }, (_, i) => ip(i)) }));
    refused(
      () => parseConfig(prev({ ips: Array.from({ length: 100_000 }, (_, i) => ip(i)) })),
      /prevResult\.ips has 100000 entries; at most 64/,
    );
    refused(
      () => parseConfig(prev({ interfaces: Array(65).fill({ name: "x" }) })),
      /prevResult\.interfaces has 65/,
    );
    refused(
      () => parseConfig(prev({ routes: Array(257).fill({ dst: "0.0.0.0/0" }) })),
      /prevResult\.routes has 257/,
    );
    refused(
      () => parseConfig(prev({ dns: { nameservers: Array(33).fill("10.0.0.2") } })),
      /prevResult\.dns\.nameservers has 33/,
    );
  }
});

Deno.test("annotations are bounded by count, total size and vpcni.io/ value size", () => {
  const withAnnotations = (a: Record<string, string>) => ({
    ...main,
    runtimeConfig: { "io.kubernetes.cri.pod-annotations": a },
  });
  const many = Object.fromEntries(Array.from({ length: 513 }, (_, i) => [`k${i}`, "v"]));
  refused(() => parseConfig(withAnnotations(many)), /has 513 entries; at most 512/);
  refused(
    () => parseConfig(withAnnotations({ big: "x".repeat(300 * 1024) })),
    /holds 307203 characters/,
  );
  refused(
    () => parseConfig(withAnnotations({ "vpcni.io/subnet-selector": "zone=" + "a".repeat(5000) })),
    /vpcni\.io\/subnet-selector"\] is 5005 characters long; at most 4096/,
  );
  parseConfig(withAnnotations({ "vpcni.io/pool": "db", other: "x".repeat(100_000) }));
});

Deno.test("names, lists and paths of the configuration are bounded", () => {
  refused(() => parseConfig({ ...main, name: "n".repeat(257) }), /name is 257 characters/);
  refused(
    () => parseConfig({ ...main, serviceCidrs: Array(65).fill("10.96.0.0/12") }),
    /serviceCidrs has 65/,
  );
  refused(() => parseConfig({ ...main, nodeIps: Array(65).fill("10.0.0.1") }), /nodeIps has 65/);
  refused(
    () => parseConfig({ ...main, daemonSocket: "/" + "s".repeat(120) }),
    /daemonSocket is 121 bytes long; a unix socket path holds at most 107/,
  );
  refused(
    () =>
      parseConfig({ ...ipamRole, ipam: { type: "vpcni", daemonSocket: "/" + "s".repeat(200) } }),
    /ipam\.daemonSocket is 201 bytes/,
  );
  refused(
    () => parseConfig({ ...main, logFile: "/" + "l".repeat(5000) }),
    /logFile is 5001 characters/,
  );
  refused(
    () =>
      parseConfig({
        ...main,
        "cni.dev/valid-attachments": Array(16385).fill({ containerID: "c", ifname: "eth0" }),
      }),
    /cni\.dev\/valid-attachments has 16385/,
  );
  refused(
    () =>
      parseConfig({
        ...ipamRole,
        ipam: { type: "vpcni", routes: Array(257).fill({ dst: "0.0.0.0/0" }) },
      }),
    /ipam\.routes has 257/,
  );
});
