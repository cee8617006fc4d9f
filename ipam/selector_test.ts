import assert from "node:assert/strict";
import { matchesTags, parseSelector, SelectorSyntaxError } from "./selector.ts";

Deno.test("selector: every operator of the label-selector syntax", () => {
  const tags = { zone: "internal", tier: "pods", env: "prod" };
  const cases: [string, boolean][] = [
    ["zone=internal", true],
    ["zone==internal", true],
    ["zone!=internal", false],
    ["zone in (internal, dmz)", true],
    ["zone in (dmz)", false],
    ["zone notin (dmz)", true],
    ["zone notin (internal)", false],
    ["missing notin (x)", true],
    ["tier", true],
    ["!tier", false],
    ["!missing", true],
    ["zone=internal,tier=pods,!missing", true],
    ["zone=internal, tier=db", false],
    ["aws:cloudformation:stack-name", false],
  ];
  for (const [text, want] of cases) {
    assert.equal(matchesTags(parseSelector(text), tags), want, text);
  }
});

Deno.test("selector: syntax errors name the column and the problem", () => {
  const bad: [string, RegExp][] = [
    ["", /empty selector/],
    ["zone in internal", /expected "\(" .*column 9/],
    ["zone in (a,", /expected a value/],
    ["zone in (a b)", /expected "," or "\)"/],
    ["zone=", /expected a value after "="/],
    ["zone=a,", /trailing comma/],
    ["!", /expected a tag key after "!"/],
    ["zone ~ a", /expected "=", "!=", "in", "notin"/],
    ["a=b c=d", /expected "," between requirements/],
  ];
  for (const [text, re] of bad) {
    assert.throws(() => parseSelector(text), (e: unknown) => {
      assert.ok(e instanceof SelectorSyntaxError, text);
      assert.match(e.message, re, text);
      return true;
    });
  }
});
