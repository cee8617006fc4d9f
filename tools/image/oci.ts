/**
 * Writing an OCI image archive: a root file tree becomes one layer, the layer and a config
 * become a manifest, and the lot is an OCI image layout (`oci-layout`, `index.json`,
 * `blobs/sha256/…`) in one tar, the format `ctr images import` reads and that any OCI tool
 * (skopeo, crane, oras, podman) can push from. The image name travels in the
 * `io.containerd.image.name` annotation, the tag in `org.opencontainers.image.ref.name`.
 *
 * The bytes depend on the content only: every tar is written with fixed mtimes, numeric
 * owners 0:0, sorted entries and no access/change times, and gzip is told to leave out the
 * file name and time, so two builds of the same tree give the same archive.
 *
 * Used by tools/runtime/oci_image.ts (the busybox test image) and tools/image.ts (vpcni).
 *
 * @module
 */

/** tar flags that make an archive's bytes depend on its content only. */
export const REPRODUCIBLE_TAR: readonly string[] = [
  "--sort=name",
  "--mtime=@0",
  "--owner=0",
  "--group=0",
  "--numeric-owner",
  "--format=posix",
  "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
];

/** Hex SHA-256 of `bytes`. */
export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The OCI name of this machine's architecture: images hold this machine's binaries. */
export function ociArchitecture(): string {
  return Deno.build.arch === "aarch64" ? "arm64" : "amd64";
}

/** Runs a tool to completion; throws with its stderr when it fails. */
async function tool(cmd: string, args: string[]): Promise<void> {
  const out = await new Deno.Command(cmd, { args, stdout: "null", stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")} failed: ${new TextDecoder().decode(out.stderr)}`);
  }
}

/** Tars the directory `root` (its content, as `./…`) reproducibly into `out`. */
export async function tarTree(root: string, out: string): Promise<void> {
  await tool("tar", [...REPRODUCIBLE_TAR, "-C", root, "-cf", out, "."]);
}

/** The image's runtime configuration (the `config` part of an OCI image config). */
export interface OciRunConfig {
  Env?: string[];
  Entrypoint?: string[];
  Cmd?: string[];
  WorkingDir?: string;
  Labels?: Record<string, string>;
}

/** What to put into the archive. */
export interface OciArchiveSpec {
  /** The root file tree of the single layer. */
  rootfs: string;
  /** Full image name, `registry/repo:tag`. */
  name: string;
  config: OciRunConfig;
  /** gzip the layer (smaller archive; `ctr` and registries take both). */
  gzip?: boolean;
  /** The `created_by` of the image's one history entry. */
  createdBy: string;
}

/** What {@linkcode writeOciArchive} produced. */
export interface OciArchive {
  /** The archive written. */
  path: string;
  /** The image name inside it. */
  name: string;
  /** `sha256:…` of the manifest (what the runtime reports as the image's digest). */
  manifestDigest: string;
  /** `sha256:…` of the config (the image id). */
  configDigest: string;
  /** Bytes of the layer blob as stored (compressed when gzipped). */
  layerSize: number;
}

/** Builds the OCI image archive of `spec.rootfs` at `path`. */
export async function writeOciArchive(path: string, spec: OciArchiveSpec): Promise<OciArchive> {
  const work = await Deno.makeTempDir({ prefix: "vpcni-oci-" });
  try {
    await tarTree(spec.rootfs, `${work}/layer.tar`);
    const diffId = await sha256Hex(await Deno.readFile(`${work}/layer.tar`));
    let layerFile = `${work}/layer.tar`;
    if (spec.gzip) {
      // -n: no file name or time in the gzip header, so the bytes stay reproducible.
      await tool("gzip", ["-n", "-6", layerFile]);
      layerFile += ".gz";
    }
    const layer = await Deno.readFile(layerFile);
    const layerHex = await sha256Hex(layer);

    const config = new TextEncoder().encode(JSON.stringify({
      architecture: ociArchitecture(),
      os: "linux",
      config: spec.config,
      rootfs: { type: "layers", diff_ids: [`sha256:${diffId}`] },
      history: [{ created_by: spec.createdBy }],
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
        mediaType: spec.gzip
          ? "application/vnd.oci.image.layer.v1.tar+gzip"
          : "application/vnd.oci.image.layer.v1.tar",
        digest: `sha256:${layerHex}`,
        size: layer.length,
      }],
    }));
    const manifestHex = await sha256Hex(manifest);

    const layout = `${work}/layout`;
    const blobs = `${layout}/blobs/sha256`;
    await Deno.mkdir(blobs, { recursive: true });
    await Deno.rename(layerFile, `${blobs}/${layerHex}`);
    await Deno.writeFile(`${blobs}/${configHex}`, config);
    await Deno.writeFile(`${blobs}/${manifestHex}`, manifest);
    await Deno.writeTextFile(
      `${layout}/oci-layout`,
      JSON.stringify({ imageLayoutVersion: "1.0.0" }),
    );
    const tag = spec.name.slice(spec.name.lastIndexOf(":") + 1);
    await Deno.writeTextFile(
      `${layout}/index.json`,
      JSON.stringify({
        schemaVersion: 2,
        manifests: [{
          mediaType: "application/vnd.oci.image.manifest.v1+json",
          digest: `sha256:${manifestHex}`,
          size: manifest.length,
          platform: { architecture: ociArchitecture(), os: "linux" },
          annotations: {
            "io.containerd.image.name": spec.name,
            "org.opencontainers.image.ref.name": tag,
          },
        }],
      }),
    );
    await tool("tar", [...REPRODUCIBLE_TAR, "-C", layout, "-cf", path, "."]);
    return {
      path,
      name: spec.name,
      manifestDigest: `sha256:${manifestHex}`,
      configDigest: `sha256:${configHex}`,
      layerSize: layer.length,
    };
  } finally {
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
}
