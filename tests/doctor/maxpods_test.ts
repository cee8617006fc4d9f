/**
 * `doctor maxpods` for every instance type in aws/data/instance-limits.tsv, against the
 * arithmetic done here from the TSV's own columns (not from the embedded table the code
 * uses), with each flag combination. A few rows also go through the real CLI to check that
 * stdout holds the number alone.
 *
 * @module
 */
import assert from "node:assert/strict";
import { maxPodsAnswer } from "../../doctor/limits.ts";
import { run } from "../helpers/sh.ts";

const repo = new URL("../..", import.meta.url).pathname;
const TSV = new URL("../../aws/data/instance-limits.tsv", import.meta.url).pathname;

interface Row {
  type: string;
  maxEnis: number;
  ipv4PerEni: number;
}

function readTsv(): Row[] {
  let text: string;
  try {
    text = Deno.readTextFileSync(TSV);
  } catch (e) {
    throw new Error(
      `instance limits TSV missing at ${TSV} (it ships in the repository): ${(e as Error).message}`,
    );
  }
  const rows = text.split("\n").filter((l) => l.trim() !== "" && !l.startsWith("#")).map((l) => {
    const [type, enis, ips] = l.split("\t");
    return { type, maxEnis: Number(enis), ipv4PerEni: Number(ips) };
  });
  assert.ok(rows.length > 1000, `expected the full table, got ${rows.length} rows`);
  return rows;
}

Deno.test("maxpods matches the arithmetic for every row of instance-limits.tsv", () => {
  const rows = readTsv();
  let checked = 0;
  for (const r of rows) {
    const plain = r.maxEnis * (r.ipv4PerEni - 1) + 2;
    assert.equal(maxPodsAnswer({ instanceType: r.type }).maxPods, plain, r.type);
    const pd = r.maxEnis * (r.ipv4PerEni - 1) * 16 + 2;
    assert.equal(
      maxPodsAnswer({ instanceType: r.type, prefixDelegation: true }).maxPods,
      pd,
      r.type,
    );
    assert.equal(
      maxPodsAnswer({ instanceType: r.type, cap: true }).maxPods,
      Math.min(plain, 110),
      r.type,
    );
    assert.equal(
      maxPodsAnswer({ instanceType: r.type, cap: true, vcpus: "64" }).maxPods,
      Math.min(plain, 250),
      r.type,
    );
    if (r.maxEnis >= 2) {
      assert.equal(
        maxPodsAnswer({ instanceType: r.type, excludePrimaryEni: true }).maxPods,
        (r.maxEnis - 1) * (r.ipv4PerEni - 1) + 2,
        r.type,
      );
      assert.equal(
        maxPodsAnswer({
          instanceType: r.type,
          maxEnis: "2",
          prefixDelegation: true,
          excludePrimaryEni: true,
        })
          .maxPods,
        1 * (r.ipv4PerEni - 1) * 16 + 2,
        r.type,
      );
    } else {
      assert.throws(
        () => maxPodsAnswer({ instanceType: r.type, excludePrimaryEni: true }),
        /--exclude-primary-eni: .* no ENI left for pods/,
      );
    }
    assert.equal(
      maxPodsAnswer({ instanceType: r.type, maxEnis: "1" }).maxPods,
      (r.ipv4PerEni - 1) + 2,
      r.type,
    );
    checked++;
  }
  assert.equal(checked, rows.length);
});

Deno.test("doctor maxpods prints the number alone, or JSON, and names bad flags", async () => {
  const vpcni = (args: string[]) =>
    run(["deno", "run", "-A", "--quiet", `${repo}main.ts`, "doctor", "maxpods", ...args], {
      env: { ...Deno.env.toObject(), NO_COLOR: "1" },
    });
  const plain = await vpcni(["--instance-type", "m5.xlarge"]);
  assert.equal(plain.code, 0, plain.stderr);
  assert.equal(plain.stdout, "58\n");
  const capped = await vpcni(["--instance-type", "c5.18xlarge", "--cap"]);
  assert.equal(capped.stdout, "110\n", "737 capped to 110 when vCPUs are unknown");
  const json = await vpcni(["--instance-type", "m5.xlarge", "--prefix-delegation", "--json"]);
  const parsed = JSON.parse(json.stdout);
  assert.equal(parsed.maxPods, 4 * 14 * 16 + 2);
  assert.equal(parsed.formula, "4 ENIs × (15 − 1) × 16 + 2 = 898");
  const bad = await vpcni(["--instance-type", "m5.huge"]);
  assert.equal(bad.code, 2);
  assert.equal(bad.stdout, "");
  assert.match(bad.stderr, /--instance-type: unknown instance type "m5.huge"/);
  assert.match(bad.stderr.replace(/\s+/g, " "), /m5 comes in m5\.large, m5\.xlarge, m5\.2xlarge,/);
  const upper = await vpcni(["--instance-type", "M5.XLarge"]);
  assert.equal(upper.code, 2);
  assert.match(upper.stderr, /did you mean m5\.xlarge\?/);
  for (const l of bad.stderr.trimEnd().split("\n")) assert.ok(l.length <= 80, l);
  const badEnis = await vpcni(["--instance-type", "m5.xlarge", "--max-enis", "0"]);
  assert.equal(badEnis.code, 2);
  assert.match(badEnis.stderr, /--max-enis: "0" must be a whole number ≥ 1/);
});
