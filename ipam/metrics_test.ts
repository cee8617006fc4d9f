import assert from "node:assert/strict";
import { createMetrics, METRIC_DOCS } from "./metrics.ts";

Deno.test("metrics: every metric the daemon registers has a README row, and every row a metric", () => {
  const { registry } = createMetrics();
  const exported = registry.getMetricsAsArray().map((m) => {
    const labels = (m as unknown as { labelNames?: string[] }).labelNames ?? [];
    return `${m.name}{${labels.join(",")}}`;
  }).sort();
  const documented = METRIC_DOCS.map((d) => `${d.name}{${d.labels.join(",")}}`).sort();
  assert.ok(exported.length > 10, `only ${exported.length} metrics registered`);
  assert.deepEqual(documented, exported, "METRIC_DOCS and createMetrics() disagree");
  assert.equal(new Set(documented).size, documented.length, "a metric documented twice");
});
