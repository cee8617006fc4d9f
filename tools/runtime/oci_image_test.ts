import assert from "node:assert/strict";
import { APPLETS, buildOciImage, DEFAULT_BUSYBOX } from "./oci_image.ts";

async function tarList(path: string): Promise<string[]> {
  const args = ["-tf", path];
  const out = await new Deno.Command("tar", { args, stdout: "piped", stderr: "piped" }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return new TextDecoder().decode(out.stdout).split("\n").filter((l) => l !== "");
}

async function tarRead(path: string, member: string): Promise<Uint8Array> {
  const out = await new Deno.Command("tar", { args: ["-xOf", path, member], stdout: "piped" })
    .output();
  assert.ok(out.success, `${member} missing from ${path}`);
  return out.stdout;
}

Deno.test({
  name: "the busybox OCI archive is a valid, reproducible image layout ctr can import",
  async fn() {
    try {
      Deno.statSync(DEFAULT_BUSYBOX);
    } catch {
      assert.fail(`${DEFAULT_BUSYBOX} is missing: install busybox-static (bash tools/dev setup)`);
    }
    const dir = await Deno.makeTempDir({ prefix: "vrt-oci-test-" });
    try {
      const a = await buildOciImage(`${dir}/a.tar`, { name: "docker.io/x/y:z" });
      const b = await buildOciImage(`${dir}/b.tar`, { name: "docker.io/x/y:z" });
      assert.deepEqual(await Deno.readFile(a.path), await Deno.readFile(b.path));

      const index = JSON.parse(new TextDecoder().decode(await tarRead(a.path, "./index.json")));
      assert.equal(index.manifests.length, 1);
      assert.equal(index.manifests[0].digest, a.manifestDigest);
      assert.equal(index.manifests[0].annotations["io.containerd.image.name"], "docker.io/x/y:z");

      // Every blob is stored under its own digest.
      for (const digest of [a.manifestDigest, a.configDigest]) {
        const hex = digest.slice("sha256:".length);
        const bytes = await tarRead(a.path, `./blobs/sha256/${hex}`);
        const sum = new Uint8Array(
          await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>),
        );
        assert.equal([...sum].map((x) => x.toString(16).padStart(2, "0")).join(""), hex);
      }
      const manifest = JSON.parse(
        new TextDecoder().decode(
          await tarRead(a.path, `./blobs/sha256/${a.manifestDigest.slice(7)}`),
        ),
      );
      const layerPath = `./blobs/sha256/${manifest.layers[0].digest.slice(7)}`;
      await Deno.writeFile(`${dir}/layer.tar`, await tarRead(a.path, layerPath));
      const files = await tarList(`${dir}/layer.tar`);
      for (const f of ["./bin/busybox", ...APPLETS.map((x) => `./bin/${x}`)]) {
        assert.ok(files.includes(f), `${f} missing from the layer`);
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("a missing busybox is named with the package that provides it", async () => {
  await assert.rejects(
    buildOciImage("/nonexistent/out.tar", { busybox: "/nonexistent/busybox" }),
    /\/nonexistent\/busybox is missing: install Debian's busybox-static/,
  );
});
