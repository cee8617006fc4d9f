import assert from "node:assert/strict";
import { KNOBS } from "../ipam/knobs.ts";
import { KNOB_TABLE_FILES, renderKnobTable, replaceKnobTable } from "./gen_knob_tables.ts";

Deno.test("gen_knob_tables: both READMEs carry the table KNOBS makes", async () => {
  for (const file of KNOB_TABLE_FILES) {
    const text = await Deno.readTextFile(new URL(`../${file}`, import.meta.url));
    assert.equal(
      replaceKnobTable(text, KNOBS, file),
      text,
      `${file}: the knob table is stale; run deno run -A tools/gen_knob_tables.ts`,
    );
  }
});

Deno.test("gen_knob_tables: pipes are escaped and a missing table is named", () => {
  const rows = renderKnobTable([{ knob: "a", def: "x", doc: "one | two" }]);
  assert.equal(rows.length, 3);
  assert.match(rows[2], /one \\\| two/);
  assert.throws(() => replaceKnobTable("# no table\n", KNOBS, "X.md"), /X.md: no knob table/);
});
