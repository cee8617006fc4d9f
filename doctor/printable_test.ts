// deno-lint-ignore-file no-control-regex -- the tests look for control characters
import assert from "node:assert/strict";
import { jsonText, visible } from "./printable.ts";
import { renderCheck, table } from "./report.ts";

const NAME = "evil\x1b[31mred\x07\nline2\rcr\u202e\x9b";

Deno.test("visible: escape, bell, newline, carriage return, C1 and bidi controls are shown escaped", () => {
  assert.equal(visible(NAME), "evil\\x1b[31mred\\x07\\nline2\\rcr\\u202e\\x9b");
  assert.equal(visible("default/web-7d9f-abc.x"), "default/web-7d9f-abc.x", "ordinary names stay");
  assert.equal(visible("naïve-ü"), "naïve-ü", "printable non-ASCII stays");
});

Deno.test("tables and checks never carry a raw control character", () => {
  const t = table(["POD", "IP"], [[NAME, "10.0.0.5"]], 200);
  assert.doesNotMatch(t, /[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]/);
  assert.ok(t.includes("evil\\x1b[31mred\\x07\\nline2\\rcr"));
  assert.equal(t.split("\n").length, 2, "the newline in the name does not start a row");
  const lines = renderCheck(
    { id: "x", title: "pods", status: "fail", found: NAME, fix: NAME, details: [NAME] },
    { color: false, width: 200 },
  );
  for (const l of lines) assert.doesNotMatch(l, /[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]/);
});

Deno.test("jsonText: DEL, C1 and bidi escaped too, and the value parses back unchanged", () => {
  const v = [{ podName: NAME + "\x7f" }];
  const text = jsonText(v);
  assert.doesNotMatch(text, /[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]/);
  assert.deepEqual(JSON.parse(text), v);
});
