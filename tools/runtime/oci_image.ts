/**
 * Builds a tiny OCI image archive from a static busybox, so a container runtime can run
 * pods here without reaching any image registry. One layer: `/bin/busybox` plus the applet
 * links a test needs. The same image serves as the sandbox ("pause") image and as the
 * workload image; its default command sleeps forever.
 *
 * The archive is an OCI image layout in a tar, written by tools/image/oci.ts (the same
 * writer as vpcni's own image): reproducible bytes, importable with `ctr images import`.
 *
 * Usage: `deno run -A tools/runtime/oci_image.ts OUT.tar [NAME] [BUSYBOX]`
 *
 * @module
 */

import { type OciArchive, writeOciArchive } from "../image/oci.ts";

/** Where Debian's busybox-static puts its binary. */
export const DEFAULT_BUSYBOX = "/bin/busybox";

/** The name the test image is imported under. */
export const DEFAULT_IMAGE_NAME = "docker.io/vpcni/busybox:runtime-test";

/** Applets linked into `/bin` next to busybox. */
export const APPLETS = ["sh", "sleep", "ping", "ip", "cat", "hostname", "ls"];

/** What {@linkcode buildOciImage} produced. */
export type OciImage = OciArchive;

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
  const work = await Deno.makeTempDir({ prefix: "vpcni-busybox-" });
  try {
    const rootfs = `${work}/rootfs`;
    await Deno.mkdir(`${rootfs}/bin`, { recursive: true });
    for (const d of ["etc", "proc", "sys", "dev", "tmp"]) await Deno.mkdir(`${rootfs}/${d}`);
    await Deno.copyFile(busybox, `${rootfs}/bin/busybox`);
    await Deno.chmod(`${rootfs}/bin/busybox`, 0o755);
    for (const a of APPLETS) await Deno.symlink("busybox", `${rootfs}/bin/${a}`);
    await Deno.writeTextFile(`${rootfs}/etc/passwd`, "root:x:0:0:root:/:/bin/sh\n");
    await Deno.writeTextFile(`${rootfs}/etc/group`, "root:x:0:\n");
    return await writeOciArchive(path, {
      rootfs,
      name,
      config: {
        Env: ["PATH=/bin"],
        // busybox's sleep takes no "infinity"; this is about 68 years.
        Cmd: ["/bin/sleep", "2147483647"],
        WorkingDir: "/",
      },
      createdBy: "vpcni tools/runtime/oci_image.ts",
    });
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
