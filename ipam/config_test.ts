import assert from "node:assert/strict";
import {
  ConfigError,
  MAX_ROUTE_TABLE_BASE,
  parseConfigText,
  resolveConfig,
  ROUTE_TABLE_SPAN,
  routeTableBaseProblem,
} from "./config.ts";
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

Deno.test("config: routeTableBase keeps every ENI table off 0 and 253–255, across its whole range", () => {
  for (let base = 0; base <= 400; base++) {
    const tables = Array.from({ length: ROUTE_TABLE_SPAN }, (_, d) => base + d);
    const collides = tables.some((t) => t === 0 || (t >= 253 && t <= 255));
    const p = routeTableBaseProblem(base);
    assert.equal(p !== undefined, collides, `base ${base}: ${p}`);
    if (p) {
      assert.match(p, /use 1–189 or 256–2147483584, e\.g\. 100 \(the default\) or 256/);
      assert.match(
        problems({ routeTableBase: base }).join(),
        new RegExp(`^routeTableBase: ${base} is unusable`),
      );
    } else assert.equal(resolveConfig({ routeTableBase: base }, {}, {}).routeTableBase, base);
  }
  assert.match(routeTableBaseProblem(253)!, /device index 1 would use table 254 \(main\)/);
  assert.match(
    problems({ routeTableBase: MAX_ROUTE_TABLE_BASE + 1 }).join(),
    /leave the kernel's range/,
  );
  assert.equal(
    resolveConfig({ routeTableBase: MAX_ROUTE_TABLE_BASE }, {}, {}).routeTableBase,
    MAX_ROUTE_TABLE_BASE,
  );
});

Deno.test("config: cooldowns and periods have documented maxima", () => {
  assert.match(
    problems({ pools: [{ name: "a", ipCooldownSeconds: 1e12 }] }).join(),
    /^pools\[0\]\.ipCooldownSeconds: must be at most 3600; got 1000000000000/,
  );
  assert.equal(
    resolveConfig({ pools: [{ name: "a", ipCooldownSeconds: 3600 }] }, {}, {}).pools[0]
      .ipCooldownSeconds,
    3600,
  );
  const knob = (k: string) => KNOBS.find((x) => x.knob === k)!.doc;
  assert.match(knob("pools[].ipCooldownSeconds"), /0–3600/);
  assert.match(knob("routeTableBase"), /1–189 or 256–2147483584/);
  for (
    const [k, max] of [
      ["releaseDelaySeconds", 86400],
      ["leakedEniGraceSeconds", 604800],
      ["imdsCheckSeconds", 3600],
      ["ec2ResyncSeconds", 86400],
      ["reconcileIntervalSeconds", 300],
    ] as const
  ) {
    assert.match(problems({ [k]: max + 1 }).join(), new RegExp(`^${k}: must be at most ${max}`));
    assert.equal(resolveConfig({ [k]: max }, {}, {})[k], max);
    assert.match(knob(k), new RegExp(`${max}\\b`), `${k}'s bound is documented`);
  }
});

Deno.test("config: every knob's README row matches its doc", async () => {
  for (const readme of ["../README.md", "./README.md"]) {
    const lines = (await Deno.readTextFile(new URL(readme, import.meta.url))).split("\n");
    const start = lines.findIndex((l) => /^\| knob +\| default/.test(l));
    assert.ok(start >= 0, `${readme} has the knob table`);
    const end = lines.findIndex((l, i) => i > start && !l.startsWith("|"));
    const table = lines.slice(start, end);
    for (const k of KNOBS) {
      const row = table.find((l) => l.startsWith(`| \`${k.knob}\``));
      assert.ok(row, `${readme} has a row for ${k.knob}`);
      const cells = row.split(/(?<!\\)\|/).map((c) => c.trim().replaceAll("\\|", "|"));
      assert.equal(cells[5], k.doc, `${readme}: ${k.knob}`);
    }
  }
});
