import assert from "node:assert/strict";
import { type CheckResult, exitCodeFor, renderCheck, renderReport, table, wrap } from "./report.ts";

const long: CheckResult = {
  id: "subnets",
  title: "subnets",
  status: "fail",
  found: "pool internal: every subnet is full (subnet-0123456789abcdef0 10.0.16.0/24 0 free, " +
    "subnet-0fedcba9876543210 10.0.17.0/24 0 free)",
  details: Array.from({ length: 8 }, (_, i) => `detail ${i} ${"x".repeat(120)}`),
  fix: "add a subnet (or a secondary VPC CIDR) that matches the pool's selector",
};

Deno.test("every rendered line fits 80 columns, details are capped, the fix follows", () => {
  const lines = renderCheck(long, { color: false });
  for (const l of lines) assert.ok(l.length <= 80, `${l.length}: ${l}`);
  assert.match(lines[0], /^\[FAIL\] subnets: pool internal/);
  assert.ok(lines.some((l) => l.includes("… and 3 more (--json)")));
  assert.match(lines.filter((l) => l.trim().startsWith("fix:"))[0], /^ {7}fix: add a subnet/);
});

Deno.test("colours only when asked; ok checks print no fix", () => {
  const ok: CheckResult = {
    id: "daemon",
    title: "daemon",
    status: "ok",
    found: "healthy",
    fix: "x",
  };
  assert.doesNotMatch(renderCheck(ok, { color: false }).join("\n"), new RegExp("\u001b|fix:"));
  assert.match(renderCheck(ok, { color: true })[0], new RegExp("^\u001b\\[32m\\[ok\\]"));
});

Deno.test("exit code is 1 only when a check fails", () => {
  const c = (status: CheckResult["status"]): CheckResult => ({
    id: "x",
    title: "x",
    status,
    found: "",
  });
  assert.equal(exitCodeFor([c("ok"), c("warn"), c("skip")]), 0);
  assert.equal(exitCodeFor([c("ok"), c("fail")]), 1);
  const text = renderReport(
    {
      ok: false,
      source: "checkpoint+kernel",
      notes: ["the daemon is not answering"],
      checks: [c("fail")],
    },
    { color: false },
  );
  assert.match(text, /^note: the daemon is not answering/);
  assert.match(text, /0 ok, 0 warn, 1 fail, 0 skipped \(facts from checkpoint\+kernel\)$/);
});

Deno.test("wrap breaks at spaces and cuts words longer than the width", () => {
  assert.deepEqual(wrap("aa bb cc", 5), ["aa bb", "cc"]);
  assert.deepEqual(wrap("abcdefghij", 4), ["abcd", "efgh", "ij"]);
  const t = table(["A", "B"], [["x".repeat(60), "y".repeat(60)]], 80);
  for (const l of t.split("\n")) assert.ok(l.length <= 80);
  assert.match(t, /…/);
});

Deno.test("a long fix wraps under itself and still fits 80 columns", () => {
  const daemonDown: CheckResult = {
    id: "daemon",
    title: "daemon",
    status: "fail",
    found: "not reachable (http://127.0.0.1:61679: fetch failed)",
    fix: "start the daemon (systemctl start vpcni, or see `kubectl -n kube-system logs " +
      "ds/vpcni`); pods cannot get addresses until it answers",
  };
  const lines = renderCheck(daemonDown, { color: false });
  for (const l of lines) assert.ok(l.length <= 80, `${l.length}: ${l}`);
  const fix = lines.findIndex((l) => l.startsWith("       fix: start the daemon"));
  assert.ok(fix > 0, lines.join("\n"));
  assert.match(lines[fix + 1], /^ {12}\S/, "continuation lines hang under the fix text");
});
