import assert from "node:assert/strict";
import { writeFileAtomic } from "./fsync.ts";

Deno.test("writeFileAtomic: replaces the file whole, with its mode, and leaves no temp file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/conf.json`;
    await writeFileAtomic(path, new TextEncoder().encode("old"), 0o600);
    const big = new Uint8Array(3 << 20).fill(0x61); // several pages: more than one write
    await writeFileAtomic(path, big, 0o644);
    assert.deepEqual(await Deno.readFile(path), big);
    assert.equal((await Deno.stat(path)).mode! & 0o777, 0o644);
    const names = [...Deno.readDirSync(dir)].map((e) => e.name);
    assert.deepEqual(names, ["conf.json"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("writeFileAtomic: a write that fails leaves the old file and no temp file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/missing-dir/conf.json`;
    await assert.rejects(
      () => writeFileAtomic(path, new Uint8Array(4), 0o644),
      Deno.errors.NotFound,
    );
    const file = `${dir}/conf.json`;
    await writeFileAtomic(file, new TextEncoder().encode("kept"), 0o644);
    // The target is a directory now: the rename fails, the directory stays as it was.
    await Deno.remove(file);
    await Deno.mkdir(file);
    await Deno.writeTextFile(`${file}/inside`, "x");
    await assert.rejects(() => writeFileAtomic(file, new Uint8Array(4), 0o644));
    assert.equal(await Deno.readTextFile(`${file}/inside`), "x");
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["conf.json"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
