/**
 * What `vpcni install` puts into the CNI bin dir: a compiled vpcni copies itself; run from
 * the image's runtime tree (the Deno runtime plus bundles, cli/runtime_launcher.ts) it puts
 * that tree and its launcher there; run from source there is no single file to copy, so it
 * writes a launcher that runs this checkout with this Deno (cli/source_launcher.ts), plus the
 * plugin bundled into one file for the CNI verbs.
 *
 * @module
 */
import { buildSourceLauncher } from "./source_launcher.ts";
import {
  RUNTIME_PARENT,
  type RuntimeTree,
  stampLauncher,
  thisRuntimeTree,
} from "./runtime_launcher.ts";

/** Permissions every way of running vpcni grants, the same as the compiled build. */
export const RUNTIME_PERMISSIONS: readonly string[] = [
  "--allow-ffi",
  "--allow-net",
  "--allow-read",
  "--allow-write",
  "--allow-env",
  "--allow-run",
  "--allow-sys=osRelease,uid,homedir",
  "--no-prompt",
];

/** V8 flags of every build: less memory for the daemon (tools/compile.ts says why). */
export const RUNTIME_V8_FLAGS = "--v8-flags=--lite-mode,--expose-gc";

/**
 * The `deno run` flags the runtime tree's launcher passes: the permissions, no config
 * discovery from whatever directory the runtime runs us in, and the V8 flags of the
 * compiled build (tools/compile.ts explains them).
 */
export const RUNTIME_FLAGS: readonly string[] = [
  ...RUNTIME_PERMISSIONS,
  "--quiet",
  "--no-config",
  RUNTIME_V8_FLAGS,
];

/** `deno run` flags of the from-source launcher: the compiled build's permissions. */
export const LAUNCHER_FLAGS: readonly string[] = [
  ...RUNTIME_PERMISSIONS,
  "--quiet",
  "--cached-only",
];

/** Where the from-source install keeps the bundled plugin: the checkout's build folder. */
export const PLUGIN_BUNDLE_PATH: string = new URL("../dist/vpcni-plugin.js", import.meta.url)
  .pathname;

/** The whole plugin's bundle, beside the thin one, which loads it only when it hands over. */
export const PLUGIN_FULL_BUNDLE_PATH: string = new URL(
  "../dist/vpcni-plugin-full.js",
  import.meta.url,
).pathname;

/** The bytes to put into the bin dir and what they are. */
export interface PluginSource {
  bytes: Uint8Array;
  kind: "executable" | "launcher" | "runtime";
  /** From source: the launcher is a static program, or a `/bin/sh` script (no C compiler). */
  launcherForm?: "program" | "script";
  from: string;
  /** From the image's runtime tree: the tree to put next to the launcher first. */
  runtime?: RuntimeTree;
  /**
   * From source: the bundled plugin the launcher runs for CNI verbs (the thin client, then
   * the whole plugin it may load), written first.
   */
  bundles?: { path: string; bytes: Uint8Array; what: string }[];
}

/** The plugin could not be bundled; the message says what `deno bundle` said. */
export class BundleError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "BundleError";
  }
}

/**
 * The file to install as `vpcni`: the compiled executable itself; run from the image's
 * runtime tree, the launcher stamped for that tree (and the tree, to put beside it); or,
 * when running from source, a launcher (kubelet runs plugins from another directory and with a
 * bare environment, so the config file, the Deno cache and the bundle are named explicitly).
 */
export async function pluginSource(): Promise<PluginSource> {
  if (Deno.build.standalone) {
    const from = Deno.execPath();
    return { bytes: await Deno.readFile(from), kind: "executable", from };
  }
  const tree = await thisRuntimeTree();
  if (tree) {
    const bytes = stampLauncher(tree.launcher, {
      runtimeDir: `${RUNTIME_PARENT}/${tree.info.id}`,
      flags: RUNTIME_FLAGS,
    });
    return { bytes, kind: "runtime", from: tree.dir, runtime: tree };
  }
  const main = new URL("../main.ts", import.meta.url).pathname;
  const config = new URL("../deno.json", import.meta.url).pathname;
  const denoDir = Deno.env.get("DENO_DIR") ??
    `${Deno.env.get("XDG_CACHE_HOME") ?? `${Deno.env.get("HOME") ?? "/root"}/.cache`}/deno`;
  const launcher = await buildSourceLauncher({
    deno: Deno.execPath(),
    denoDir,
    cniArgs: ["run", ...LAUNCHER_FLAGS, "--no-config", PLUGIN_BUNDLE_PATH],
    cliArgs: ["run", ...LAUNCHER_FLAGS, "--config", config, main],
  });
  return {
    bytes: launcher.bytes,
    kind: "launcher",
    launcherForm: launcher.form,
    from: main,
    bundles: [
      {
        path: PLUGIN_FULL_BUNDLE_PATH,
        bytes: await bundleProgram("pluginFull"),
        what: "the whole plugin in one file, loaded by the thin one when it hands over",
      },
      {
        path: PLUGIN_BUNDLE_PATH,
        bytes: await bundleProgram("plugin"),
        what: "the plugin's thin client in one file, run for CNI verbs",
      },
    ],
  };
}

/**
 * The entry of each bundle: the plugin's thin client, the whole plugin (which the thin one
 * loads from beside itself, and the image's daemon starts its CNI workers from), or the whole
 * program.
 */
export const BUNDLE_ENTRIES = {
  plugin: new URL("../cni/entry.ts", import.meta.url).pathname,
  pluginFull: new URL("./plugin_full.ts", import.meta.url).pathname,
  program: new URL("./entry.ts", import.meta.url).pathname,
} as const;

/**
 * Bundles the plugin (cni/entry.ts) or the whole program (cli/entry.ts) with this Deno into
 * one JavaScript file and returns its bytes.
 */
export async function bundleProgram(which: keyof typeof BUNDLE_ENTRIES): Promise<Uint8Array> {
  const entry = BUNDLE_ENTRIES[which];
  const config = new URL("../deno.json", import.meta.url).pathname;
  const dir = await Deno.makeTempDir({ prefix: "vpcni-bundle-" });
  try {
    const out = `${dir}/vpcni.js`;
    const r = await new Deno.Command(Deno.execPath(), {
      args: ["bundle", "--quiet", "--platform=deno", "--config", config, "-o", out, entry],
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!r.success) {
      const said = new TextDecoder().decode(r.stderr).trim().split("\n")[0] ?? "";
      throw new BundleError(
        `could not bundle the plugin (deno bundle ${entry}): ${said || `exit ${r.code}`}; ` +
          "install a compiled vpcni instead (deno task compile)",
      );
    }
    return await Deno.readFile(out);
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}
