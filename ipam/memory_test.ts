import assert from "node:assert/strict";
import { collectGarbage } from "./memory.ts";

const MEMORY = new URL("./memory.ts", import.meta.url).href;

Deno.test("memory: without --expose-gc nothing runs; with it, garbage is collected", async () => {
  assert.equal(collectGarbage(), false, "this test runner has no --expose-gc");
  // A child with the flag, as the compiled executable would have it baked in.
  const script = `
    const { collectGarbage } = await import(${JSON.stringify(MEMORY)});
    let junk = Array.from({ length: 200_000 }, (_, i) => ({ i, s: "x" + i }));
    const before = Deno.memoryUsage().heapUsed;
    junk = [];
    const ran = collectGarbage();
    console.log(JSON.stringify({ ran, before, after: Deno.memoryUsage().heapUsed, n: junk.length }));
  `;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--v8-flags=--expose-gc", script],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const err = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, err);
  const r = JSON.parse(new TextDecoder().decode(out.stdout));
  assert.equal(r.ran, true);
  assert.ok(r.after < r.before / 2, `heap in use ${r.before} → ${r.after}`);
});
