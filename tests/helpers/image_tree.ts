/**
 * The vpcni image for tests: built by the real `deno task image` into a temp dir, its layer
 * unpacked into a root file tree, as a container runtime would lay it out. Also makes a
 * second release from it (another runtime tree id and version) to test upgrades.
 *
 * @module
 */
import { run, sh } from "./sh.ts";
import {
  readStamp,
  RUNTIME_PARENT,
  type RuntimeInfo,
  stampLauncher,
} from "../../cli/runtime_launcher.ts";

const repo = new URL("../..", import.meta.url).pathname;

/** A built image and its unpacked root. */
export interface BuiltImage {
  /** The OCI archive. */
  archive: string;
  /** Where its single layer is unpacked. */
  root: string;
  /** What `deno task image` printed. */
  stdout: string;
  stderr: string;
}

/** Reads a member of a tar archive. */
export async function tarMember(archive: string, member: string): Promise<Uint8Array> {
  const out = await new Deno.Command("tar", { args: ["-xOf", archive, member], stdout: "piped" })
    .output();
  if (!out.success) throw new Error(`${member} missing from ${archive}`);
  return out.stdout;
}

/** The parsed manifest of the archive's one image. */
export async function imageManifest(archive: string): Promise<{
  config: { digest: string };
  layers: { digest: string; mediaType: string; size: number }[];
}> {
  const index = JSON.parse(new TextDecoder().decode(await tarMember(archive, "./index.json")));
  const digest: string = index.manifests[0].digest;
  return JSON.parse(
    new TextDecoder().decode(await tarMember(archive, `./blobs/sha256/${digest.slice(7)}`)),
  );
}

/** Runs `deno task image` (the real tool) with `args` and extra env. */
export async function runImageTool(args: string[], env: Record<string, string> = {}) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "tools/image.ts", ...args],
    cwd: repo,
    env: { NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** Builds the image into `dir/image.tar` and unpacks its layer into `dir/root`. */
export async function buildImage(dir: string): Promise<BuiltImage> {
  const archive = `${dir}/image.tar`;
  const r = await runImageTool(["--output", archive]);
  if (r.code !== 0) throw new Error(`deno task image failed:\n${r.stderr}${r.stdout}`);
  const manifest = await imageManifest(archive);
  const root = `${dir}/root`;
  await Deno.mkdir(root);
  await Deno.writeFile(
    `${dir}/layer.tar.gz`,
    await tarMember(archive, `./blobs/sha256/${manifest.layers[0].digest.slice(7)}`),
  );
  await sh(["tar", "-xzf", `${dir}/layer.tar.gz`, "-C", root]);
  await Deno.remove(`${dir}/layer.tar.gz`);
  return { archive, root, stdout: r.stdout, stderr: r.stderr };
}

/** The runtime tree of an unpacked image root. */
export async function imageRuntime(root: string): Promise<{ dir: string; info: RuntimeInfo }> {
  const parent = `${root}/usr/local/bin/${RUNTIME_PARENT}`;
  const [name] = [...Deno.readDirSync(parent)].map((e) => e.name);
  const dir = `${parent}/${name}`;
  return { dir, info: JSON.parse(await Deno.readTextFile(`${dir}/runtime.json`)) };
}

/**
 * A copy of the unpacked image at `to` that is release `version`: its runtime tree renamed
 * to a new id, `runtime.json` and the bundled VPCNI_VERSION changed, the launcher restamped.
 */
export async function otherRelease(root: string, to: string, version: string): Promise<string> {
  await sh(["cp", "-a", root, to]);
  const { dir, info } = await imageRuntime(to);
  const id = `${version}-${info.id.split("-")[1]}`;
  const newDir = dir.replace(/[^/]*$/, id);
  await Deno.rename(dir, newDir);
  await Deno.writeTextFile(
    `${newDir}/runtime.json`,
    JSON.stringify({ ...info, version, id }, null, 2) + "\n",
  );
  const js = await Deno.readTextFile(`${newDir}/vpcni.js`);
  await Deno.writeTextFile(
    `${newDir}/vpcni.js`,
    js.replace(`VPCNI_VERSION = "${info.version}"`, `VPCNI_VERSION = "${version}"`),
  );
  const launcherPath = `${to}/usr/local/bin/vpcni`;
  const launcher = await Deno.readFile(launcherPath);
  const stamp = readStamp(launcher)!;
  await Deno.writeFile(
    launcherPath,
    stampLauncher(launcher, { ...stamp, runtimeDir: `${RUNTIME_PARENT}/${id}` }),
  );
  return id;
}

/** kubelet's PATH for plugins; nothing else is in their environment. */
export const BARE_PATH = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";

/**
 * Runs `cmd` as kubelet runs a plugin (nothing but PATH and `env` in the environment) in a
 * private mount namespace where this machine's Deno is hidden (/usr/bin/deno and the global
 * npm root), so the plugin can only use what it brought along.
 */
export async function withoutHostDeno(
  cmd: string[],
  opts: { stdin?: string; env?: string[] } = {},
) {
  const hide = "mount --bind /dev/null /usr/bin/deno && " +
    'mount -t tmpfs none "$(npm root -g)" && ! command -v deno >/dev/null && ' +
    'exec env -i "$@"';
  return await run(
    ["unshare", "--mount", "sh", "-c", hide, "sh", BARE_PATH, ...(opts.env ?? []), ...cmd],
    { stdin: opts.stdin },
  );
}
