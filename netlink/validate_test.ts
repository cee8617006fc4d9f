import assert from "node:assert/strict";
import { checkIfName, checkNetnsPath, checkU32 } from "./validate.ts";
import { InvalidInputError } from "./errors.ts";

Deno.test("interface names follow the kernel's rules", () => {
  assert.equal(checkIfName("eth0"), "eth0");
  assert.equal(checkIfName("a234567890abcde"), "a234567890abcde"); // 15 bytes
  assert.throws(() => checkIfName("a234567890abcdef"), /16 bytes; the kernel allows at most 15/);
  assert.throws(() => checkIfName("é234567890abcde"), /16 bytes/); // multi-byte counts in bytes
  for (const bad of ["a/b", "a b", "a\tb", "a:b", "", ".", ".."]) {
    assert.throws(() => checkIfName(bad), InvalidInputError, JSON.stringify(bad));
  }
});

Deno.test("u32 values and netns paths are checked", () => {
  assert.equal(checkU32(0, "p"), 0);
  assert.equal(checkU32(0xffffffff, "p"), 0xffffffff);
  assert.throws(
    () => checkU32(-1, "rule priority"),
    /rule priority must be an integer in 0..4294967295/,
  );
  assert.throws(() => checkU32(2 ** 32, "p"), InvalidInputError);
  assert.throws(() => checkU32(1.5, "p"), InvalidInputError);
  assert.throws(() => checkNetnsPath("/run/netns/vnl-does-not-exist"), /does not exist/);
  assert.throws(() => checkNetnsPath("/tmp"), /is a directory/);
});
