/**
 * The vpcni image's file tree, in one of two forms:
 * - compiled: `/usr/local/bin/vpcni` is the executable `deno compile` built (tools/compile.ts);
 * - runtime: `/usr/local/bin/vpcni` is the launcher, next to `vpcni.d/<id>/` holding the Deno
 *   runtime from npm and the two bundles (layout in cli/runtime_launcher.ts).
 * Either way the tree holds exactly the shared libraries the executable loads, at the paths
 * `ldd` names (symlinks resolved to their files), and an empty `/tmp`; nothing else, no shell.
 *
 * @module
 */
import {
  RUNTIME_PARENT,
  runtimeId,
  type RuntimeInfo,
  stampLauncher,
} from "../../cli/runtime_launcher.ts";
import { RUNTIME_FLAGS } from "../../cli/launcher.ts";
import { VPCNI_VERSION } from "../../base/version.ts";
import { sha256Hex } from "./oci.ts";
import { sharedLibraries } from "./pieces.ts";

/** Where the entrypoint sits in the image (the DaemonSet's command). */
export const IMAGE_ENTRYPOINT = "/usr/local/bin/vpcni";

/** The runtime form's inputs. */
export interface RuntimePieces {
  /** The Deno runtime binary. */
  deno: string;
  /** The whole program, bundled. */
  program: Uint8Array;
  /** The plugin's thin client, bundled. */
  plugin: Uint8Array;
  /** The whole plugin, bundled (the thin one loads it from beside itself). */
  pluginFull: Uint8Array;
  /** The launcher as built (unstamped or stamped: the stamp is rewritten). */
  launcher: Uint8Array;
  /** The Deno version of `deno`. */
  denoVersion: string;
}

async function writeFileMode(path: string, bytes: Uint8Array, mode: number): Promise<void> {
  await Deno.mkdir(path.replace(/\/[^/]*$/, ""), { recursive: true });
  await Deno.writeFile(path, bytes);
  await Deno.chmod(path, mode); // the umask plays no part in the image
}

/** Copies each library to its `ldd` path under `root`, as a file (symlinks resolved). */
async function addLibraries(root: string, executable: string): Promise<string[]> {
  const libs = await sharedLibraries(executable);
  for (const lib of libs) {
    const real = await Deno.realPath(lib);
    const mode = (Deno.statSync(real).mode ?? 0o755) & 0o777;
    await writeFileMode(`${root}${lib}`, await Deno.readFile(real), mode);
  }
  return libs;
}

/** Gives every directory under `root` mode 0755 (and `/tmp` 1777). */
async function normalizeDirs(root: string): Promise<void> {
  await Deno.chmod(root, 0o755);
  for await (const e of Deno.readDir(root)) {
    if (e.isDirectory) await normalizeDirs(`${root}/${e.name}`);
  }
}

async function finish(root: string): Promise<void> {
  await Deno.mkdir(`${root}/tmp`, { recursive: true });
  await normalizeDirs(root);
  await Deno.chmod(`${root}/tmp`, 0o1777);
}

/** Lays out the compiled form under `root`; returns the libraries added. */
export async function compiledRootfs(root: string, executable: string): Promise<string[]> {
  await writeFileMode(`${root}${IMAGE_ENTRYPOINT}`, await Deno.readFile(executable), 0o755);
  const libs = await addLibraries(root, executable);
  await finish(root);
  return libs;
}

/**
 * Lays out the runtime form under `root`; returns the tree's `runtime.json` and the
 * libraries added. The tree id hashes the runtime and both bundles, so a rebuilt program
 * of the same release gets a tree of its own.
 */
export async function runtimeRootfs(
  root: string,
  p: RuntimePieces,
): Promise<{ info: RuntimeInfo; libs: string[] }> {
  const deno = await Deno.readFile(p.deno);
  const hashes = await Promise.all([deno, p.program, p.plugin, p.pluginFull].map(sha256Hex));
  const info: RuntimeInfo = {
    version: VPCNI_VERSION,
    id: runtimeId(await sha256Hex(new TextEncoder().encode(hashes.join("\n")))),
    deno: p.denoVersion,
  };
  const bin = `${root}${IMAGE_ENTRYPOINT.replace(/\/[^/]*$/, "")}`;
  const tree = `${bin}/${RUNTIME_PARENT}/${info.id}`;
  await writeFileMode(`${tree}/deno`, deno, 0o755);
  await writeFileMode(`${tree}/vpcni.js`, p.program, 0o644);
  await writeFileMode(`${tree}/vpcni-plugin.js`, p.plugin, 0o644);
  await writeFileMode(`${tree}/vpcni-plugin-full.js`, p.pluginFull, 0o644);
  await writeFileMode(
    `${tree}/runtime.json`,
    new TextEncoder().encode(JSON.stringify(info, null, 2) + "\n"),
    0o644,
  );
  const launcher = stampLauncher(p.launcher, {
    runtimeDir: `${RUNTIME_PARENT}/${info.id}`,
    flags: RUNTIME_FLAGS,
  });
  await writeFileMode(`${root}${IMAGE_ENTRYPOINT}`, launcher, 0o755);
  const libs = await addLibraries(root, p.deno);
  await finish(root);
  return { info, libs };
}
