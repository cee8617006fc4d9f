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
import { sharedLibraries } from "../../tools/image/pieces.ts";
import { startCtrContainerd } from "../helpers/ctr_containerd.ts";
import { run, sh } from "../helpers/sh.ts";
import {
  buildImage,
  type BuiltImage,
  imageManifest,
  imageRuntime,
  runImageTool,
  tarMember,
  withoutHostDeno,
} from "../helpers/image_tree.ts";

const TAG = `vim${Deno.pid % 100000}`;
const repo = new URL("../..", import.meta.url).pathname;
const main = `${repo}main.ts`;
const scenario = `${repo}examples/scenarios/one-node.yaml`;

/** The image all tests here look at, built once (and removed when the module unloads). */
let shared: Promise<BuiltImage> | undefined;
function sharedImage(): Promise<BuiltImage> {
  if (!shared) {
    const dir = Deno.makeTempDirSync({ prefix: `${TAG}-shared-` });
    globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
    shared = buildImage(dir);
  }
  return shared;
}

/** The first line a process prints. */
async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  let text = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    text += chunk;
    if (text.includes("\n")) break;
  }
  return text.split("\n")[0];
}
Deno.test({
  name: "deno task image: two builds give the same bytes; the layer holds the launcher, the " +
    "runtime tree and exactly deno's libraries, owned 0:0 at time 0, no shell",
  sanitizeResources: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: `${TAG}-` });
    try {
      const t0 = performance.now();
      const a = await sharedImage();
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
          `${tree}/vpcni-plugin-full.js`,
          `${tree}/vpcni-plugin.js`,
          `${tree}/vpcni.js`,
          ...libs,
        ].sort(),
      );
      for (const lib of ["libc.so.6", "libgcc_s.so.1", "libm.so.6", "ld-linux-x86-64.so.2"]) {
        assert.ok(files.some((f) => f.endsWith(`/${lib}`)), `${lib} is missing`);
      }
      // The launcher needs no library at all; the plugin bundle carries no npm package.
      assert.deepEqual(await sharedLibraries(`${a.root}/usr/local/bin/vpcni`), []);
      for (const f of ["vpcni-plugin.js", "vpcni-plugin-full.js"]) {
        const plugin = await Deno.readTextFile(`${a.root}/${tree}/${f}`);
        assert.doesNotMatch(plugin, /@aws-sdk|commander|zod|npm:/, f);
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "containerd 1.6 imports the image with ctr and runs it: `version`; `install` puts a " +
    "plugin on the host that runs with no Deno there; `doctor` reaches EC2 and IMDS",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    assert.equal(Deno.uid(), 0, "needs root (containerd, mounts)");
    const dir = await Deno.makeTempDir({ prefix: `${TAG}-` });
    let containerd: Awaited<ReturnType<typeof startCtrContainerd>> | undefined;
    try {
      const image = await sharedImage();
      await Deno.mkdir(`${dir}/ctrd`);
      containerd = await startCtrContainerd(`${dir}/ctrd`, TAG);
      const { ctrRun, ctrRunRaw } = containerd;
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
          // The host's containerd, where install looks for it (a hostPath of /usr/bin).
          "--mount",
          "type=bind,src=/usr/bin/containerd,dst=/host/usr/bin/containerd,options=rbind:ro",
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
      // Debian's containerd 1.6, asked from inside the image, gets the cniVersion it takes.
      assert.match(
        first.replace(/\s+/g, " "),
        /cniVersion 1\.0\.0: containerd 1\.6\.\d+ \(\/host\/usr\/bin\/containerd\) takes up to 1\.0\.0/,
      );

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

      // The daemon's side of the image: the bundled AWS SDK reaches EC2 and IMDS (the
      // simulator on loopback; host network) with nothing but credentials in the environment.
      const sim = new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", "--quiet", main, "sim", "--scenario", scenario, "--json"],
        stdout: "piped",
        stderr: "null",
      }).spawn();
      try {
        const line = await firstLine(sim.stdout);
        const ends = JSON.parse(line) as { ec2Endpoint: string; imds: Record<string, string> };
        const doctor = await ctrRunRaw("d", [
          "--net-host",
          "--env",
          "AWS_ACCESS_KEY_ID=demo",
          "--env",
          "AWS_SECRET_ACCESS_KEY=demo",
          "docker.io/vpcni/vpcni:0.1.0",
          `${TAG}-d`,
          "/usr/local/bin/vpcni",
          "doctor",
          "--ec2-endpoint",
          ends.ec2Endpoint,
          "--imds-endpoint",
          Object.values(ends.imds)[0],
          "--json",
        ]);
        const checks = JSON.parse(doctor.stdout).checks as { id: string; status: string }[];
        const status = Object.fromEntries(checks.map((c) => [c.id, c.status]));
        assert.equal(status["imds"], "ok", doctor.stdout);
        assert.equal(status["ec2-permissions"], "ok", doctor.stdout);
        assert.equal(status["subnets"], "ok", doctor.stdout);
      } finally {
        sim.kill("SIGTERM");
        await sim.status;
      }
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

Deno.test({
  name: "an OCI tool pushes the archive to a registry, which then serves the same manifest digest",
  sanitizeResources: false,
  async fn() {
    const image = await sharedImage();
    const dir = await Deno.makeTempDir({ prefix: `${TAG}-registry-` });
    const port = 20000 + (Deno.pid % 20000);
    await Deno.writeTextFile(
      `${dir}/config.yml`,
      `version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: ${dir}/data\n` +
        `http:\n  addr: 127.0.0.1:${port}\n`,
    );
    // The CNCF distribution registry (Debian's docker-registry), on loopback.
    const registry = new Deno.Command("docker-registry", {
      args: ["serve", `${dir}/config.yml`],
      stdout: "null",
      stderr: "null",
    }).spawn();
    try {
      const ref = `docker://127.0.0.1:${port}/vpcni/vpcni:0.1.0`;
      let push = { code: -1, stdout: "", stderr: "" };
      for (let i = 0; i < 20 && push.code !== 0; i++) {
        if (i > 0) await new Promise((r) => setTimeout(r, 250)); // until it listens
        push = await run([
          "skopeo",
          "copy",
          "--dest-tls-verify=false",
          `oci-archive:${image.archive}`,
          ref,
        ]);
      }
      assert.equal(push.code, 0, push.stderr);
      const served = JSON.parse(await sh(["skopeo", "inspect", "--tls-verify=false", ref]));
      const index = JSON.parse(
        new TextDecoder().decode(await tarMember(image.archive, "./index.json")),
      );
      assert.equal(served.Digest, index.manifests[0].digest);
      assert.equal(served.Labels["org.opencontainers.image.version"], "0.1.0");
    } finally {
      registry.kill("SIGTERM");
      await registry.status;
      await Deno.remove(dir, { recursive: true });
    }
  },
});
