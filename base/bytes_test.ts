import assert from "node:assert/strict";
import { concatBytes } from "./bytes.ts";

Deno.test("concatBytes puts the parts one after another", () => {
  const a = new Uint8Array([1, 2]);
  const b = new Uint8Array([3]);
  const joined = concatBytes([a, new Uint8Array(0), b, a.subarray(1)]);
  assert.deepEqual([...joined], [1, 2, 3, 2]);
});

Deno.test("concatBytes returns a copy, never one of its parts", () => {
  const a = new Uint8Array([7, 8]);
  const joined = concatBytes([a]);
  joined[0] = 0;
  assert.equal(a[0], 7);
  assert.equal(concatBytes([]).length, 0);
});
