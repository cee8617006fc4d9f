/**
 * Builds a tiny OCI image archive from a static busybox, so a container runtime can run
 * pods here without reaching any image registry. One layer: `/bin/busybox` plus the applet
 * links a test needs. The same image serves as the sandbox ("pause") image and as the
 * workload image; its default command sleeps forever.
 *
 * The archive is an OCI image layout in a tar (`oci-layout`, `index.json`, `blobs/sha256/…`),
 * the format `ctr images import` reads; the image name is carried by the
 * `io.containerd.image.name` annotation. The bytes are reproducible: fixed mtimes, numeric
 * owners, sorted entries.
 *
 * Usage: `deno run -A tools/runtime/oci_image.ts OUT.tar [NAME] [BUSYBOX]`
 *
 * @module
 */

/** Where Debian's busybox-static puts its binary. */
export const DEFAULT_BUSYBOX = "/bin/busybox";

/** The name the test image is imported under. */
export const DEFAULT_IMAGE_NAME = "docker.io/vpcni/busybox:runtime-test";

/** Applets linked into `/bin` next to busybox. */
export const APPLETS = ["sh", "sleep", "ping", "ip", "cat", "hostname", "ls"];

/** What {@linkcode buildOciImage} produced. */
export interface OciImage {
  /** The archive written. */
  path: string;
  /** The image name inside it. */
  name: string;
  /** `sha256:…` of the manifest (what the runtime reports as the image's digest). */
  manifestDigest: string;
  /** `sha256:…` of the config (the image id). */
  configDigest: string;
}

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function tar(args: string[]): Promise<void> {
  const out = await new Deno.Command("tar", { args, stdout: "null", stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`tar ${args.join(" ")} failed: ${new TextDecoder().decode(out.stderr)}`);
  }
}

/** tar flags that make an archive's bytes depend on its content only. */
const REPRODUCIBLE = [
  "--sort=name",
  "--mtime=@0",
  "--owner=0",
  "--group=0",
  "--numeric-owner",
  "--format=posix",
  "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
];

/**
 * Writes the OCI archive of the busybox image to `path`. Throws naming the missing file when
 * busybox is absent (install Debian's `busybox-static`).
 */
export async function buildOciImage(
  path: string,
  opts: { name?: string; busybox?: string } = {},
): Promise<OciImage> {
  const name = opts.name ?? DEFAULT_IMAGE_NAME;
  const busybox = opts.busybox ?? DEFAULT_BUSYBOX;
  try {
    Deno.statSync(busybox);
  } catch {
    throw new Error(
      `${busybox} is missing: install Debian's busybox-static (apt-get install busybox-static)`,
    );
  }
  const work = await Deno.makeTempDir({ prefix: "vpcni-oci-" });
  try {
    const rootfs = `${work}/rootfs`;
    await Deno.mkdir(`${rootfs}/bin`, { recursive: true });
    for (const d of ["etc", "proc", "sys", "dev", "tmp"]) await Deno.mkdir(`${rootfs}/${d}`);
    await Deno.copyFile(busybox, `${rootfs}/bin/busybox`);
    await Deno.chmod(`${rootfs}/bin/busybox`, 0o755);
    for (const a of APPLETS) await Deno.symlink("busybox", `${rootfs}/bin/${a}`);
    await Deno.writeTextFile(`${rootfs}/etc/passwd`, "root:x:0:0:root:/:/bin/sh\n");
    await Deno.writeTextFile(`${rootfs}/etc/group`, "root:x:0:\n");
    await tar([...REPRODUCIBLE, "-C", rootfs, "-cf", `${work}/layer.tar`, "."]);
    const layer = await Deno.readFile(`${work}/layer.tar`);
    const layerHex = await sha256Hex(layer);

    const config = new TextEncoder().encode(JSON.stringify({
      architecture: "amd64",
      os: "linux",
      config: {
        Env: ["PATH=/bin"],
        // busybox's sleep takes no "infinity"; this is about 68 years.
        Cmd: ["/bin/sleep", "2147483647"],
        WorkingDir: "/",
      },
      rootfs: { type: "layers", diff_ids: [`sha256:${layerHex}`] },
      history: [{ created_by: "vpcni tools/runtime/oci_image.ts" }],
    }));
    const configHex = await sha256Hex(config);
    const manifest = new TextEncoder().encode(JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: {
        mediaType: "application/vnd.oci.image.config.v1+json",
        digest: `sha256:${configHex}`,
        size: config.length,
      },
      layers: [{
        mediaType: "application/vnd.oci.image.layer.v1.tar",
        digest: `sha256:${layerHex}`,
        size: layer.length,
      }],
    }));
    const manifestHex = await sha256Hex(manifest);

    const layout = `${work}/layout`;
    const blobs = `${layout}/blobs/sha256`;
    await Deno.mkdir(blobs, { recursive: true });
    await Deno.writeFile(`${blobs}/${layerHex}`, layer);
    await Deno.writeFile(`${blobs}/${configHex}`, config);
    await Deno.writeFile(`${blobs}/${manifestHex}`, manifest);
    await Deno.writeTextFile(
      `${layout}/oci-layout`,
      JSON.stringify({ imageLayoutVersion: "1.0.0" }),
    );
    const tag = name.slice(name.lastIndexOf(":") + 1);
    await Deno.writeTextFile(
      `${layout}/index.json`,
      JSON.stringify({
        schemaVersion: 2,
        manifests: [{
          mediaType: "application/vnd.oci.image.manifest.v1+json",
          digest: `sha256:${manifestHex}`,
          size: manifest.length,
          platform: { architecture: "amd64", os: "linux" },
          annotations: {
            "io.containerd.image.name": name,
            "org.opencontainers.image.ref.name": tag,
          },
        }],
      }),
    );
    await tar([...REPRODUCIBLE, "-C", layout, "-cf", path, "."]);
    return {
      path,
      name,
      manifestDigest: `sha256:${manifestHex}`,
      configDigest: `sha256:${configHex}`,
    };
  } finally {
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
}

if (import.meta.main) {
  const [out, name, busybox] = Deno.args;
  if (!out) {
    console.error("usage: oci_image.ts OUT.tar [NAME] [BUSYBOX]");
    Deno.exit(2);
  }
  const img = await buildOciImage(out, { name, busybox });
  console.log(`${img.path}: ${img.name} (manifest ${img.manifestDigest})`);
}
