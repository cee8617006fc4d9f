import assert from "node:assert/strict";
import { findLaneHost, isStaticElf, which } from "./prereqs.ts";

Deno.test("prereqs: a static busybox is told apart from a dynamic executable", () => {
  assert.equal(isStaticElf(findLaneHost().busybox), true);
  assert.equal(isStaticElf(Deno.execPath()), false); // deno links against glibc
  assert.equal(isStaticElf(new URL("./init.sh", import.meta.url).pathname), false);
});

Deno.test("prereqs: which finds executables on the given PATH only", () => {
  assert.equal(which("sh", "/nonexistent:/bin"), "/bin/sh");
  assert.equal(which("sh", "/nonexistent"), undefined);
});
