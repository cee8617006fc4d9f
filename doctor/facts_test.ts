import assert from "node:assert/strict";
import { KNOBS } from "../ipam/knobs.ts";
import { defaultConfig, gatherFacts } from "./facts.ts";
import { withDaemonDown } from "../tests/helpers/doctor_offline.ts";

Deno.test("doctor's config defaults are the daemon's documented ones", () => {
  const d = defaultConfig() as Record<string, unknown>;
  const keys = [
    "clusterName",
    "datapath",
    "stateDir",
    "listen",
    "routeTableBase",
    "leakedEniGraceSeconds",
  ];
  for (const k of keys) {
    const knob = KNOBS.find((x) => x.knob === k);
    assert.ok(knob, `no knob ${k}`);
    assert.equal(String(d[k]), knob.def, k);
  }
  const pool = defaultConfig().pools[0];
  for (const k of ["warmIps", "warmEnis", "minimumIps", "firstInterfaceIndex"] as const) {
    assert.equal(String(pool[k]), KNOBS.find((x) => x.knob === `pools[].${k}`)?.def, k);
  }
});

Deno.test("with the daemon down, --config is read as the daemon reads it, defaults filled", async () => {
  await withDaemonDown("vqa-cfg-", async (down, dir) => {
    const o = { ...down, configFile: `${dir}/vpcni.yaml` };
    await Deno.writeTextFile(o.configFile, "routeTableBase: 300\npools: [{name: a}]\n");
    const f = await gatherFacts(o);
    assert.equal(f.config.routeTableBase, 300);
    assert.equal(f.config.clusterName, defaultConfig().clusterName);
    assert.deepEqual(f.config.pools.map((p) => [p.name, p.warmEnis]), [["a", 1]]);

    // A knob the daemon does not know makes it refuse the file: doctor says so.
    await Deno.writeTextFile(o.configFile, "routeTableBsae: 200\n");
    const bad = await gatherFacts(o);
    assert.equal(bad.config.routeTableBase, defaultConfig().routeTableBase);
    assert.ok(
      bad.notes.some((n) => n.includes(o.configFile) && /routeTableBsae/.test(n)),
      bad.notes.join("\n"),
    );
  });
});
