import assert from "node:assert/strict";
import { ConfigError, parseConfigText, resolveConfig } from "./config.ts";
import { KNOBS } from "./knobs.ts";

function problems(content: unknown, env: Record<string, string> = {}): string[] {
  try {
    resolveConfig(content, env, {});
  } catch (e) {
    assert.ok(e instanceof ConfigError, String(e));
    return e.problems;
  }
  assert.fail("config was accepted");
}

Deno.test("config: defaults for an empty file, every knob documented", () => {
  const c = resolveConfig({}, {}, {});
  assert.equal(c.socketPath, "/run/vpcni/ipam.sock");
  assert.equal(c.stateDir, "/var/lib/vpcni");
  assert.equal(c.listen, "127.0.0.1:61679");
  assert.equal(c.pools.length, 1);
  assert.equal(c.pools[0].name, "default");
  assert.equal(c.pools[0].warmEnis, 1);
  assert.equal(c.pools[0].allowSharedSubnets, true);
  const documented = new Set(KNOBS.map((k) => k.knob.replace("pools[].", "")));
  for (const key of Object.keys(c)) assert.ok(documented.has(key) || key === "pools", key);
  for (const key of Object.keys(c.pools[0])) assert.ok(documented.has(key), `pools[].${key}`);
});

Deno.test("config: YAML file, then env, then flags", () => {
  const file = parseConfigText(
    "clusterName: from-file\nlisten: 127.0.0.1:9000\npools:\n  - name: a\n    subnets: {tags: 'zone in (internal)'}\n",
    "t.yaml",
  );
  const c = resolveConfig(file, { VPCNI_CLUSTER_NAME: "from-env", VPCNI_LISTEN: "127.0.0.2:1" }, {
    listen: "127.0.0.1:7",
  });
  assert.equal(c.clusterName, "from-env");
  assert.equal(c.listen, "127.0.0.1:7");
  assert.deepEqual(c.pools[0].subnets, { tags: "zone in (internal)" });
});

Deno.test("config: every bad knob is named, all at once", () => {
  const p = problems({
    clusterName: "",
    datapath: "vxlan",
    listen: "0.0.0.0:61679",
    socketPath: "relative.sock",
    addTimeoutSeconds: -1,
    colour: "blue",
    pools: [
      { name: "Bad_Name", warmIps: -2, subnets: { tags: "zone in internal" } },
      { name: "b", securityGroups: { ids: ["sg-zz"] }, subnets: { ids: ["subnet-1", "vpc-1"] } },
      { name: "c", maxEnis: 0, firstInterfaceIndex: 1.5, prefixDelegation: "yes", extra: 1 },
    ],
  }).join("\n");
  for (
    const want of [
      /^clusterName: /m,
      /^datapath: /m,
      /^listen: must be a loopback address/m,
      /^socketPath: /m,
      /^addTimeoutSeconds: /m,
      /unknown knob\(s\): colour/,
      /^pools\[0\]\.name: must be a DNS label/m,
      /^pools\[0\]\.warmIps: /m,
      /^pools\[0\]\.subnets/m,
      /^pools\[1\]\.securityGroups/m,
      /^pools\[1\]\.subnets/m,
      /^pools\[2\]\.maxEnis: /m,
      /^pools\[2\]\.firstInterfaceIndex: /m,
      /^pools\[2\]\.prefixDelegation: /m,
      /^pools\[2\]: unknown knob\(s\): extra/m,
    ]
  ) {
    assert.match(p, want);
  }
});

Deno.test("config: cross-knob checks once each knob is well-formed", () => {
  const p = problems({ defaultPool: "nope", pools: [{ name: "b" }, { name: "b" }] }).join("\n");
  assert.match(p, /^pools\[1\]\.name: duplicate pool name "b"/m);
  assert.match(p, /^defaultPool: no pool named "nope"/m);
});

Deno.test("config: bad YAML and bad env values are refused", () => {
  assert.throws(() => parseConfigText("pools: [", "x.yaml"), /x\.yaml.*not valid YAML/s);
  assert.match(problems({}, { VPCNI_LISTEN: "10.0.0.1:80" }).join(), /^listen: must be a loopback/);
  assert.match(problems([]).join(), /expected a mapping/);
});

Deno.test("config: every example in examples/daemon parses", async () => {
  const dir = new URL("../examples/daemon/", import.meta.url);
  let n = 0;
  for await (const e of Deno.readDir(dir)) {
    const text = await Deno.readTextFile(new URL(e.name, dir));
    const c = resolveConfig(parseConfigText(text, e.name), {}, {}, e.name);
    assert.ok(c.pools.length >= 1, e.name);
    n++;
  }
  assert.ok(n >= 3);
});
