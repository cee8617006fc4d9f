import assert from "node:assert/strict";
import { KNOBS } from "../ipam/knobs.ts";
import { METRIC_DOCS } from "../ipam/metrics.ts";
import {
  KNOB_TABLE_FILES,
  regenerate,
  renderKnobTable,
  renderMetricTable,
  replaceKnobTable,
  replaceMetricTable,
} from "./gen_knob_tables.ts";

Deno.test("gen_knob_tables: both READMEs carry the tables KNOBS and METRIC_DOCS make", async () => {
  for (const file of KNOB_TABLE_FILES) {
    const text = await Deno.readTextFile(new URL(`../${file}`, import.meta.url));
    assert.equal(
      regenerate(text, file),
      text,
      `${file}: a generated table is stale; run deno run -A tools/gen_knob_tables.ts`,
    );
    for (const m of METRIC_DOCS) assert.ok(text.includes(`\`${m.name}`), `${file}: ${m.name}`);
  }
});

Deno.test("gen_knob_tables: pipes are escaped and a missing table is named", () => {
  const rows = renderKnobTable([{ knob: "a", def: "x", doc: "one | two" }]);
  assert.equal(rows.length, 3);
  assert.match(rows[2], /one \\\| two/);
  assert.throws(() => replaceKnobTable("# no table\n", KNOBS, "X.md"), /X.md: no knob table/);
  const metrics = renderMetricTable([{ name: "m_total", labels: ["a", "b"], doc: "x | y" }]);
  assert.match(metrics[2], /^\| `m_total\{a,b\}` \| x \\\| y +\|$/);
  assert.throws(
    () => replaceMetricTable("| knob | default |\n", METRIC_DOCS, "Y.md"),
    /Y.md: no metrics table/,
  );
});
