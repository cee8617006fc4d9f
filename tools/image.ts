/**
 * `deno task image`: builds the vpcni container image as an OCI image archive (one gzipped
 * layer, reproducible bytes), ready for `ctr -n k8s.io images import` or any OCI tool's push
 * (e.g. `skopeo copy oci-archive:dist/vpcni-image.tar docker://…`).
 *
 * What it holds (tools/image/rootfs.ts):
 * - when denort is at hand (`DENORT_BIN`, or Deno's download cache; see tools/compile.ts):
 *   the compiled executable at `/usr/local/bin/vpcni`;
 * - otherwise: the Deno runtime from npm, the whole program and the plugin each bundled into
 *   one file (`deno bundle`), and the launcher at `/usr/local/bin/vpcni` that runs them;
 * plus exactly the shared libraries the executable loads. The same image serves the
 * DaemonSet's init container (`vpcni install`) and its daemon (`vpcni serve`).
 *
 * Usage: `deno task image [--output FILE] [--name NAME] [--dry-run]`
 *
 * @module
 */
import { parseArgs } from "node:util";
import { bundleProgram } from "../cli/launcher.ts";
import { VPCNI_VERSION } from "../base/version.ts";
import { defaultDenoDir, main as compileMain, REPO_ROOT, resolveDenort } from "./compile.ts";
import { writeOciArchive } from "./image/oci.ts";
import { buildLauncher, ImageError, npmDenoRuntime } from "./image/pieces.ts";
import { compiledRootfs, IMAGE_ENTRYPOINT, runtimeRootfs } from "./image/rootfs.ts";

/** The image name unless `--name` says otherwise. */
export const DEFAULT_IMAGE_NAME = `docker.io/vpcni/vpcni:${VPCNI_VERSION}`;
/** The archive path unless `--output` says otherwise (relative to the repo root). */
export const DEFAULT_IMAGE_OUTPUT = "dist/vpcni-image.tar";

/** Which form the image takes, and why. */
export type ImageForm =
  | { kind: "compiled"; denort: string }
  | { kind: "runtime"; reason: string };

/** Compiled when denort can be had without a download, the runtime form otherwise. */
export function chooseForm(env: Record<string, string | undefined>): ImageForm {
  const src = resolveDenort(env, defaultDenoDir());
  if (src.kind === "download") {
    return { kind: "runtime", reason: "no DENORT_BIN and no denort in Deno's download cache" };
  }
  return { kind: "compiled", denort: src.path };
}

function abs(path: string): string {
  return path.startsWith("/") ? path : `${REPO_ROOT}/${path}`;
}

/** Builds the image; returns the process exit code. */
export async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      output: { type: "string", short: "o", default: DEFAULT_IMAGE_OUTPUT },
      name: { type: "string", default: DEFAULT_IMAGE_NAME },
      "dry-run": { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log("usage: deno task image [--output FILE] [--name NAME] [--dry-run]");
    return 0;
  }
  const started = performance.now();
  const step = (s: string) => console.error(`image: ${s}`);
  const output = abs(values.output);
  const name = values.name;
  if (!/^[a-z0-9.-]+(:\d+)?\/[a-z0-9._/-]+:[A-Za-z0-9_.-]+$/.test(name)) {
    console.error(`image: --name: "${name}" must be a full name like ${DEFAULT_IMAGE_NAME}`);
    return 2;
  }
  const form = chooseForm(Deno.env.toObject());
  step(
    form.kind === "compiled"
      ? `compiled executable (denort: ${form.denort})`
      : `Deno runtime from npm + bundles (${form.reason})`,
  );
  if (values["dry-run"]) {
    console.log(`${output}: ${name} (${form.kind})`);
    return 0;
  }
  const work = await Deno.makeTempDir({ prefix: "vpcni-image-" });
  // The archive is written beside its place and renamed there whole.
  const tmp = `${output}.tmp-${Deno.pid}`;
  try {
    const root = `${work}/rootfs`;
    let libs: string[];
    let what: string;
    if (form.kind === "compiled") {
      const code = await compileMain(["--output", `${work}/vpcni`]);
      if (code !== 0) throw new ImageError("deno task compile failed (above); no image written");
      libs = await compiledRootfs(root, `${work}/vpcni`);
      what = "compiled executable";
    } else {
      const deno = await npmDenoRuntime(Deno.version.deno, `${REPO_ROOT}/dist`);
      step(`deno ${Deno.version.deno}: ${deno.path} (${deno.how})`);
      const [program, plugin, pluginFull] = [
        await bundleProgram("program"),
        await bundleProgram("plugin"),
        await bundleProgram("pluginFull"),
      ];
      step(
        `bundled: program ${program.length} bytes, plugin ${plugin.length} bytes ` +
          `(the whole plugin ${pluginFull.length} bytes)`,
      );
      await buildLauncher(`${work}/launcher`);
      const r = await runtimeRootfs(root, {
        deno: deno.path,
        program,
        plugin,
        pluginFull,
        launcher: await Deno.readFile(`${work}/launcher`),
        denoVersion: Deno.version.deno,
      });
      libs = r.libs;
      what = `runtime tree ${r.info.id}`;
    }
    step(`libraries: ${libs.join(" ")}`);
    await Deno.mkdir(output.replace(/\/[^/]*$/, ""), { recursive: true });
    const img = await writeOciArchive(tmp, {
      rootfs: root,
      name,
      gzip: true,
      createdBy: `vpcni tools/image.ts (${what})`,
      config: {
        Env: ["PATH=/usr/local/bin"],
        Entrypoint: [IMAGE_ENTRYPOINT],
        Cmd: ["--help"],
        WorkingDir: "/",
        Labels: {
          "org.opencontainers.image.title": "vpcni",
          "org.opencontainers.image.version": VPCNI_VERSION,
        },
      },
    });
    await Deno.rename(tmp, output);
    const size = Deno.statSync(output).size;
    const secs = ((performance.now() - started) / 1000).toFixed(1);
    console.log(
      `${values.output}: ${name}, ${what}, ${(size / 2 ** 20).toFixed(1)} MiB ` +
        `(layer ${(img.layerSize / 2 ** 20).toFixed(1)} MiB gzipped), manifest ` +
        `${img.manifestDigest}, built in ${secs} s`,
    );
    return 0;
  } catch (e) {
    if (e instanceof ImageError) {
      console.error(`image: ${e.message}`);
      return 1;
    }
    throw e;
  } finally {
    await Deno.remove(work, { recursive: true }).catch(() => {});
    await Deno.remove(tmp).catch(() => {}); // left only by a failed build
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
