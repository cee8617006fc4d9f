import assert from "node:assert/strict";
import { matchesFilters, paginate, QueryParams } from "./query.ts";
import { SimError } from "./errors.ts";

const q = (s: string) => new QueryParams(new URLSearchParams(s));

Deno.test("numbered lists, structs, filters and tags are read in numeric order", () => {
  const p = q(
    "Id.10=j&Id.2=b&Id.1=a&Filter.2.Name=vpc-id&Filter.2.Value.1=v&Filter.1.Name=tag:zone" +
      "&Filter.1.Value.2=y&Filter.1.Value.1=x&Tag.1.Key=k&Tag.1.Value=v&Tag.2.Key=e",
  );
  assert.deepEqual(p.list("Id"), ["a", "b", "j"]);
  assert.deepEqual(p.filters(new Set(["vpc-id"])), [{ name: "tag:zone", values: ["x", "y"] }, {
    name: "vpc-id",
    values: ["v"],
  }]);
  assert.deepEqual(p.tags("Tag"), { k: "v", e: "" });
});

Deno.test("a filter name the action does not take is InvalidParameterValue when read", () => {
  assert.throws(
    () => q("Filter.1.Name=subnet&Filter.1.Value.1=x").filters(new Set(["subnet-id"])),
    (e) =>
      e instanceof SimError && e.code === "InvalidParameterValue" &&
      e.message === "The filter 'subnet' is invalid",
  );
  const tags = q("Filter.1.Name=tag:a&Filter.1.Value.1=x&Filter.2.Name=tag-key&Filter.2.Value.1=a");
  assert.equal(tags.filters(new Set()).length, 2);
});

Deno.test("bad integers, booleans and reserved tag keys are InvalidParameterValue", () => {
  const err = (fn: () => unknown) =>
    assert.throws(fn, (e) => e instanceof SimError && e.code === "InvalidParameterValue");
  err(() => q("N=1.5").int("N"));
  err(() => q("N=0").int("N", { min: 1 }));
  err(() => q("B=yes").bool("B"));
  err(() => q("Tag.1.Key=aws:x").tags("Tag"));
  assert.throws(
    () => q("").required("X"),
    (e) => e instanceof SimError && e.code === "MissingParameter",
  );
});

Deno.test("filters: OR within a filter, AND across, wildcards, unknown names refused", () => {
  const r = {
    fields: { "subnet-id": ["subnet-1"], status: ["in-use"] },
    tags: new Map([["zone", "internal"]]),
  };
  const known = new Set(["subnet-id", "status"]);
  assert.ok(matchesFilters(r, [{ name: "subnet-id", values: ["subnet-2", "subnet-1"] }], known));
  assert.ok(
    !matchesFilters(r, [{ name: "subnet-id", values: ["subnet-1"] }, {
      name: "status",
      values: ["available"],
    }], known),
  );
  assert.ok(
    matchesFilters(r, [{ name: "tag:zone", values: ["int*"] }, {
      name: "tag-key",
      values: ["z?ne"],
    }], known),
  );
  assert.ok(!matchesFilters(r, [{ name: "tag:team", values: ["*"] }], known));
  assert.throws(
    () => matchesFilters(r, [{ name: "colour", values: ["x"] }], known),
    /filter 'colour'/,
  );
});

Deno.test("pagination walks every item once; a forged token is refused", () => {
  const items = Array.from({ length: 12 }, (_, i) => i);
  const seen: number[] = [];
  let token: string | undefined;
  do {
    const p = paginate(
      items,
      q(`MaxResults=5${token ? `&NextToken=${encodeURIComponent(token)}` : ""}`),
      { min: 5, max: 1000 },
    );
    seen.push(...p.page);
    token = p.nextToken;
  } while (token);
  assert.deepEqual(seen, items);
  assert.throws(
    () => paginate(items, q("NextToken=zzz"), { min: 5, max: 1000 }),
    /pagination token/,
  );
});
