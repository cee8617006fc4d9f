import assert from "node:assert/strict";
import { parseLimitsTsv, renderLimitsTable } from "./gen_limits_table.ts";

const TSV = [
  "# instance_type\tmax_enis\tipv4_per_eni\thypervisor\tbare_metal\tnetwork_cards\tdefault_card",
  "m5.large\t3\t10\tnitro\tfalse\t0:3\t0",
  "c6in.metal\t8\t50\tunknown\ttrue\t0:8,1:8\t0",
  "",
].join("\n");

Deno.test("gen_limits_table: parses rows, sorts them and renders an importable module", async () => {
  const rows = parseLimitsTsv(TSV, "t.tsv");
  assert.deepEqual(rows.map((r) => r.instanceType), ["c6in.metal", "m5.large"]);
  assert.deepEqual(rows[0].networkCards, [[0, 8], [1, 8]]);
  const src = renderLimitsTable(rows, "t.tsv");
  const mod = await import(`data:application/typescript,${encodeURIComponent(src)}`);
  assert.equal(mod.LIMITS_TABLE_SIZE, 2);
  assert.deepEqual(mod.LIMITS_TABLE["m5.large"], [3, 10, "nitro", false, [[0, 3]], 0]);
});

Deno.test("gen_limits_table: bad rows name the line and the field", () => {
  const bad = (row: string) => parseLimitsTsv(`# h\n${row}\n`, "x.tsv");
  assert.throws(() => bad("m5.large\t3\t10\tnitro\tfalse\t0:3"), /x.tsv:2: expected 7/);
  assert.throws(() => bad("m5.large\t0\t10\tnitro\tfalse\t0:3\t0"), /x.tsv:2: field max_enis/);
  assert.throws(() => bad("m5.large\t3\tten\tnitro\tfalse\t0:3\t0"), /field ipv4_per_eni/);
  assert.throws(() => bad("m5.large\t3\t10\tkvm\tfalse\t0:3\t0"), /field hypervisor/);
  assert.throws(() => bad("m5.large\t3\t10\tnitro\tyes\t0:3\t0"), /field bare_metal/);
  assert.throws(() => bad("m5.large\t3\t10\tnitro\tfalse\t0-3\t0"), /field network_cards/);
  assert.throws(() => bad("m5.large\t3\t10\tnitro\tfalse\t0:3\t1"), /field default_card/);
  assert.throws(() => bad("M5 large\t3\t10\tnitro\tfalse\t0:3\t0"), /field instance_type/);
  assert.throws(
    () => parseLimitsTsv("a.b\t1\t2\tnitro\tfalse\t0:1\t0\na.b\t1\t2\tnitro\tfalse\t0:1\t0", "d"),
    /d:2: duplicate instance_type a.b/,
  );
  assert.throws(() => parseLimitsTsv("# only a header\n", "e.tsv"), /e.tsv: no instance types/);
});

Deno.test("gen_limits_table: the embedded table is the one aws/data/instance-limits.tsv makes", async () => {
  const tsv = new URL("../aws/data/instance-limits.tsv", import.meta.url);
  const embedded = new URL("../aws/limits_table.ts", import.meta.url);
  const rendered = renderLimitsTable(
    parseLimitsTsv(await Deno.readTextFile(tsv), "instance-limits.tsv"),
    "instance-limits.tsv",
  );
  assert.equal(
    await Deno.readTextFile(embedded),
    rendered,
    "aws/limits_table.ts is stale: run deno run -A tools/gen_limits_table.ts aws/data/instance-limits.tsv",
  );
});
