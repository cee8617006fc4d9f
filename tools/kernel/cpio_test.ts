import assert from "node:assert/strict";
import { writeCpio } from "./cpio.ts";
import { findLaneHost } from "./prereqs.ts";

Deno.test("cpio: busybox cpio unpacks what writeCpio wrote, byte for byte", async () => {
  const data = new Uint8Array(1027).map((_, i) => (i * 7) % 256); // not a multiple of 4
  const archive = writeCpio([
    { kind: "dir", path: "bin" },
    { kind: "file", path: "bin/tool", data, mode: 0o755 },
    { kind: "symlink", path: "bin/alias", target: "tool" },
    { kind: "file", path: "empty", data: new Uint8Array() },
  ]);
  const dir = await Deno.makeTempDir({ prefix: "vpcni-cpio-" });
  try {
    const cpio = new Deno.Command(findLaneHost().busybox, {
      args: ["cpio", "-i", "-d"],
      cwd: dir,
      stdin: "piped",
      stderr: "piped",
    }).spawn();
    const w = cpio.stdin.getWriter();
    await w.write(archive);
    await w.close();
    const out = await cpio.output();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    assert.deepEqual(await Deno.readFile(`${dir}/bin/tool`), data);
    assert.equal((await Deno.stat(`${dir}/bin/tool`)).mode! & 0o777, 0o755);
    assert.equal(await Deno.readLink(`${dir}/bin/alias`), "tool");
    assert.equal((await Deno.readFile(`${dir}/empty`)).length, 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cpio: an absolute path is refused", () => {
  assert.throws(
    () => writeCpio([{ kind: "dir", path: "/bin" }]),
    /cpio path must be relative/,
  );
});
