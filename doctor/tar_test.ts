import assert from "node:assert/strict";
import { tar, tarGz } from "./tar.ts";

async function tarCmd(args: string[], input: Uint8Array): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "vdr-tar-" });
  try {
    await Deno.writeFile(`${dir}/a`, input);
    const out = await new Deno.Command("tar", {
      args: [...args, `${dir}/a`],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    return new TextDecoder().decode(out.stdout);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("GNU tar lists and extracts what the writer wrote, long names included", async () => {
  const long = `kernel/pods/${"p".repeat(90)}/${"q".repeat(80)}.json`;
  const files = [
    { name: "meta.json", data: '{"a":1}\n' },
    { name: long, data: "x".repeat(1000) },
    { name: "empty.txt", data: "" },
  ];
  assert.equal(await tarCmd(["tf"], tar(files)), `meta.json\n${long}\nempty.txt\n`);
  assert.equal(await tarCmd(["xzOf"], tarGz(files)), '{"a":1}\n' + "x".repeat(1000));
  assert.equal(tar(files).length % 512, 0);
});

Deno.test("a path that cannot fit ustar is refused", () => {
  assert.throws(() => tar([{ name: "x".repeat(300), data: "" }]), /path too long/);
});
