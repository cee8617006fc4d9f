/**
 * `deno task image` as a release is built and shipped: the real tool, twice, byte for byte;
 * the archive's content; Debian's containerd 1.6 importing it with `ctr` and running it, once
 * as the daemon's image (`version --json`) and once as the DaemonSet's init container
 * (`install` into the host's CNI dirs, bind-mounted); and the compiled form chosen when
 * denort is given.
 *
 * Needs root, containerd, ctr and runc (`bash tools/dev setup`), gcc and libc6-dev for the
 * launcher.
 *
 * @module
 */
import assert from "node:assert/strict";
import { run, sh } from "../helpers/sh.ts";
import {
  buildImage,
  imageManifest,
  imageRuntime,
  runImageTool,
  tarMember,
  withoutHostDeno,
} from "../helpers/image_tree.ts";

const TAG = `vim${Deno.pid % 100000}`;
/** A private containerd 1.6 without the CRI (only `ctr` talks to it). */
async function startContainerd(
  dir: string,
): Promise<
  { ctrRun: (name: string, a: string[]) => Promise<string>; stop: () => Promise<void> }
> {
  await Deno.writeTextFile(
    `${dir}/config.toml`,
    `version = 2
root = "${dir}/root"
state = "${dir}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "${dir}/containerd.sock"
[ttrpc]
  address = "${dir}/containerd.sock.ttrpc"
[metrics]
  address = ""
`,
  );
  const log = await Deno.open(`${dir}/containerd.log`, { create: true, write: true });
  const proc = new Deno.Command("containerd", {
    args: ["--config", `${dir}/config.toml`],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  proc.stderr.pipeTo(log.writable).catch(() => {});
  const ctr = async (args: string[]) =>
    await sh(["ctr", "--address", `${dir}/containerd.sock`, "--namespace", "k8s.io", ...args]);
  /** `ctr run --rm` with the container's cgroup under /<TAG>, removed by `stop`. */
  const ctrRun = async (name: string, args: string[]) =>
    await ctr(["run", "--rm", "--cgroup", `/${TAG}/${name}`, ...args]);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await run(["ctr", "--address", `${dir}/containerd.sock`, "version"]);
    if (r.code === 0) break;
    if (Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(
        `containerd did not answer: ${await Deno.readTextFile(`${dir}/containerd.log`)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const stop = async () => {
    proc.kill("SIGTERM");
    await proc.status;
    const mounts = (await Deno.readTextFile("/proc/self/mounts")).split("\n")
      .map((l) => l.split(" ")[1]).filter((m) => m?.startsWith(dir)).reverse();
    for (const m of mounts) await run(["umount", "-l", m]);
    for (const h of Deno.readDirSync("/sys/fs/cgroup")) {
      await Deno.remove(`/sys/fs/cgroup/${h.name}/${TAG}`).catch(() => {}); // only when empty
    }
  };
  return { ctrRun, stop };
}

Deno.test({
  name: "deno task image: two builds give the same bytes; the layer holds the launcher, the " +
    "runtime tree and exactly deno's libraries, owned 0:0 at time 0, no shell",
  sanitizeResources: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: `${TAG}-` });
    try {
      const t0 = performance.now();
      const a = await buildImage(dir);
      const secs = (performance.now() - t0) / 1000;
      const b = await runImageTool(["--output", `${dir}/again.tar`]);
      assert.equal(b.code, 0, b.stderr);
      assert.deepEqual(await Deno.readFile(`${dir}/again.tar`), await Deno.readFile(a.archive));
      const size = Deno.statSync(a.archive).size;
      console.log(`image: ${(size / 2 ** 20).toFixed(1)} MiB, built in ${secs.toFixed(1)} s`);
      assert.ok(size < 60 * 2 ** 20, `the image is ${size} bytes`);
      assert.match(a.stdout, /docker\.io\/vpcni\/vpcni:0\.1\.0, runtime tree/);

      // Every blob is stored under its own digest; the layer is gzipped.
      const manifest = await imageManifest(a.archive);
      assert.equal(manifest.layers[0].mediaType, "application/vnd.oci.image.layer.v1.tar+gzip");
      const config = JSON.parse(
        new TextDecoder().decode(
          await tarMember(a.archive, `./blobs/sha256/${manifest.config.digest.slice(7)}`),
        ),
      );
      assert.deepEqual(config.config.Entrypoint, ["/usr/local/bin/vpcni"]);

      const listing = await sh([
        "sh",
        "-c",
        `tar -xOf ${a.archive} ./blobs/sha256/${manifest.layers[0].digest.slice(7)} | ` +
        "tar --numeric-owner --full-time -tvzf -",
      ]);
      const entries = listing.trim().split("\n").map((l) => l.split(/\s+/));
      for (const e of entries) {
        assert.equal(e[1], "0/0", `owner of ${e.at(-1)}`);
        assert.equal(e[3], "1970-01-01", `mtime of ${e.at(-1)}`);
      }
      const files = entries.filter((e) => !e[0].startsWith("d")).map((e) => e.at(-1)!).sort();
      const { info } = await imageRuntime(a.root);
      const tree = `./usr/local/bin/vpcni.d/${info.id}`;
      const ldd = await sh(["ldd", `${a.root}/${tree}/deno`]);
      const libs = [...ldd.matchAll(/(\/\S+) \(0x/g)].map((m) => `.${m[1]}`);
      assert.deepEqual(
        files,
        [
          "./usr/local/bin/vpcni",
          `${tree}/deno`,
          `${tree}/runtime.json`,
          `${tree}/vpcni-plugin.js`,
          `${tree}/vpcni.js`,
          ...libs,
        ].sort(),
      );
      for (const lib of ["libc.so.6", "libgcc_s.so.1", "libm.so.6", "ld-linux-x86-64.so.2"]) {
        assert.ok(files.some((f) => f.endsWith(`/${lib}`)), `${lib} is missing`);
      }
      // The launcher needs no library at all; the plugin bundle carries no npm package.
      assert.match(await sh(["file", `${a.root}/usr/local/bin/vpcni`]), /statically linked/);
      const plugin = await Deno.readTextFile(`${a.root}/${tree}/vpcni-plugin.js`);
      assert.doesNotMatch(plugin, /@aws-sdk|commander|zod|npm:/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "containerd 1.6 imports the image with ctr, runs `vpcni version`, and its install " +
    "puts a plugin on the host that runs with no Deno there",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    assert.equal(Deno.uid(), 0, "needs root (containerd, mounts)");
    const dir = await Deno.makeTempDir({ prefix: `${TAG}-` });
    let containerd: Awaited<ReturnType<typeof startContainerd>> | undefined;
    try {
      const image = await buildImage(dir);
      await Deno.mkdir(`${dir}/ctrd`);
      containerd = await startContainerd(`${dir}/ctrd`);
      const { ctrRun } = containerd;
      const imported = await sh([
        "ctr",
        "--address",
        `${dir}/ctrd/containerd.sock`,
        "-n",
        "k8s.io",
        "images",
        "import",
        image.archive,
      ]);
      assert.match(imported, /docker\.io\/vpcni\/vpcni:0\.1\.0/);

      const version = JSON.parse(
        await ctrRun("v", [
          "docker.io/vpcni/vpcni:0.1.0",
          `${TAG}-v`,
          "/usr/local/bin/vpcni",
          "version",
          "--json",
        ]),
      );
      assert.equal(version.version, "0.1.0");
      assert.equal(version.deno, Deno.version.deno);

      // The init container: the host's CNI dirs mounted at /host/…, as in the DaemonSet.
      const host = `${dir}/host`;
      await Deno.mkdir(`${host}/opt/cni/bin`, { recursive: true });
      await Deno.mkdir(`${host}/etc/cni/net.d`, { recursive: true });
      const install = (name: string) =>
        ctrRun(name, [
          "--mount",
          `type=bind,src=${host}/opt/cni/bin,dst=/host/opt/cni/bin,options=rbind:rw`,
          "--mount",
          `type=bind,src=${host}/etc/cni/net.d,dst=/host/etc/cni/net.d,options=rbind:rw`,
          "docker.io/vpcni/vpcni:0.1.0",
          name,
          "/usr/local/bin/vpcni",
          "install",
          "--bin-dir=/host/opt/cni/bin",
          "--conflist-file=/host/etc/cni/net.d/10-vpcni.conflist",
        ]);
      const first = await install(`${TAG}-i1`);
      assert.match(first, /runtime +\/host\/opt\/cni\/bin\/vpcni\.d\/0\.1\.0-\w+: installed/);
      assert.match(first, /binary +\/host\/opt\/cni\/bin\/vpcni: installed/);

      const cni = await withoutHostDeno([`${host}/opt/cni/bin/vpcni`], {
        env: ["CNI_COMMAND=VERSION"],
        stdin: '{"cniVersion":"1.0.0"}',
      });
      assert.equal(cni.code, 0, cni.stderr);
      assert.equal(JSON.parse(cni.stdout).cniVersion, "1.0.0");
      const cli = await withoutHostDeno([`${host}/opt/cni/bin/vpcni`, "version", "--json"]);
      assert.equal(cli.code, 0, cli.stderr);
      assert.equal(JSON.parse(cli.stdout).version, "0.1.0");

      const second = await install(`${TAG}-i2`);
      assert.match(second, /runtime .*: unchanged/);
      assert.match(second, /binary .*: unchanged/);
      assert.match(second, /conflist .*: unchanged/);
    } finally {
      await containerd?.stop();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("with DENORT_BIN the image takes the compiled executable, built by deno task compile", async () => {
  const dir = await Deno.makeTempDir({ prefix: `${TAG}-` });
  try {
    const plan = await runImageTool(["--dry-run", "--output", `${dir}/img.tar`], {
      DENORT_BIN: "/bin/true",
    });
    assert.equal(plan.code, 0, plan.stderr);
    assert.match(plan.stderr, /compiled executable \(denort: \/bin\/true\)/);
    const without = await runImageTool(["--dry-run", "--output", `${dir}/img.tar`]);
    assert.match(without.stderr, /Deno runtime from npm \+ bundles \(no DENORT_BIN/);

    // deno compile takes any file as denort; the build proves it by running the result.
    // /bin/true stands for a wrong download: the image build stops there, writing nothing.
    await Deno.copyFile("/bin/true", `${dir}/denort`);
    const r = await runImageTool(["--output", `${dir}/img.tar`], {
      DENORT_BIN: `${dir}/denort`,
    });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /compile: deno compile --allow-ffi/);
    assert.match(r.stderr, /does not run as vpcni on Deno/);
    assert.match(r.stderr, /image: deno task compile failed/);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["denort"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("deno task image refuses a name that is not a full image name", async () => {
  const r = await runImageTool(["--dry-run", "--name", "vpcni"]);
  assert.equal(r.code, 2);
  assert.match(
    r.stderr,
    /--name: "vpcni" must be a full name like docker\.io\/vpcni\/vpcni:0\.1\.0/,
  );
});
