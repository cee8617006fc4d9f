/**
 * `vpcni install`: puts the vpcni executable into the CNI bin dir and the network
 * configuration list into the CNI conf dir, the way kubelet's runtime finds them.
 *
 * Both files are written atomically (a temp file in the same directory, fsync, rename), so a
 * runtime that execs the plugin or reads the conflist at that moment sees the old file or
 * the new one, never half of either. Running it twice changes nothing the second time and
 * says "unchanged". Every flag is checked before anything is written.
 *
 * What is copied: a compiled vpcni copies itself (`Deno.execPath()`). Run from source
 * (`deno run main.ts install`) there is no single file to copy, so a small launcher is
 * written instead that execs this Deno on this checkout with the same permissions the
 * compiled build has, plus the plugin bundled into one file for the CNI verbs
 * (cli/launcher.ts): a static program built with the C compiler, or a `/bin/sh` script where
 * there is none (cli/source_launcher.ts); the report says which it installed. The conflist is built and checked
 * in cli/conflist.ts.
 *
 * @module
 */
import type { Command } from "commander";
import { BundleError, pluginSource } from "./launcher.ts";
import { installRuntimeTree, readStamp, removeOldTrees } from "./runtime_launcher.ts";
import {
  CHAINABLE,
  type ConflistFlags,
  DATAPATHS,
  DEFAULT_SOCKET,
  InstallError,
  resolveConflist,
} from "./conflist.ts";
import { SUPPORTED_CNI_VERSIONS } from "../cni/versions.ts";
import { writeFileAtomic } from "../base/fsync.ts";
import {
  chooseCniVersion,
  type CniVersionChoice,
  cniVersionWarning,
  missingPlugins,
  missingPluginsMessage,
} from "./install_checks.ts";
import { detectRuntime, RuntimeProbeError } from "./runtime_cni.ts";

/** Where container runtimes look for CNI plugins by default. */
export const DEFAULT_CNI_BIN_DIR = "/opt/cni/bin";
/** Where container runtimes look for network configurations by default. */
export const DEFAULT_CNI_CONF_FILE = "/etc/cni/net.d/10-vpcni.conflist";

/** The flags `install` accepts, as commander hands them over. */
export interface InstallFlags extends ConflistFlags {
  binDir: string;
  conflistFile: string;
  skipBinary?: boolean;
  skipConflist?: boolean;
  dryRun?: boolean;
  json?: boolean;
  /** The containerd binary to ask which CNI versions it takes (else found on PATH). */
  containerd?: string;
  /** Write the conflist even when a plugin it names is missing from the bin dir. */
  allowMissingPlugins?: boolean;
}

/** What an install did, and what the operator should know about it. */
export interface InstallReport {
  actions: InstallAction[];
  /** Things that will go wrong on this node unless fixed (printed to stderr). */
  warnings: string[];
  /** The conflist's cniVersion and why (absent with --skip-conflist). */
  cniVersion?: CniVersionChoice;
}

/** What happened (or would happen) to one file. */
export interface InstallAction {
  what: "binary" | "bundle" | "runtime" | "conflist";
  path: string;
  /**
   * `installed`/`written` when changed, `unchanged`, `would …` with --dry-run, `removed` for
   * an older runtime tree cleaned up after the switch.
   */
  result:
    | "installed"
    | "written"
    | "unchanged"
    | "would install"
    | "would write"
    | "skipped"
    | "removed";
  /** A short explanation: the source of the binary, the bytes written. */
  detail: string;
  /** With --dry-run: the conflist that would be written. */
  content?: string;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

async function readIfExists(path: string): Promise<Uint8Array | undefined> {
  try {
    return await Deno.readFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/** Refuses a path whose directory exists but is not a directory, naming the flag. */
function checkTargetDir(dir: string, flag: string): void {
  try {
    const st = Deno.statSync(dir);
    if (!st.isDirectory) throw new InstallError(`${flag}: ${dir} exists and is not a directory`);
  } catch (e) {
    if (e instanceof InstallError) throw e;
    if (!(e instanceof Deno.errors.NotFound)) {
      throw new InstallError(`${flag}: cannot use ${dir}: ${(e as Error).message}`);
    }
  }
}

/** Writes `bytes` to `path` atomically (see base/fsync.ts), creating its directory first. */
async function writeAtomic(path: string, bytes: Uint8Array, mode: number): Promise<void> {
  await Deno.mkdir(path.replace(/\/[^/]*$/, "") || "/", { recursive: true });
  await writeFileAtomic(path, bytes, mode);
}

/** Performs (or, with `dryRun`, describes) the install. Validates everything first. */
export async function install(f: InstallFlags): Promise<InstallReport> {
  checkTargetDir(f.binDir, "--bin-dir");
  if (!f.conflistFile.startsWith("/") || f.conflistFile.endsWith("/")) {
    throw new InstallError(`--conflist-file: "${f.conflistFile}" must be an absolute file path`);
  }
  checkTargetDir(f.conflistFile.replace(/\/[^/]*$/, "") || "/", "--conflist-file");
  const warnings: string[] = [];
  let choice: CniVersionChoice | undefined;
  let conflist;
  if (!f.skipConflist) {
    const runtime = await detectRuntime(f.containerd).catch((e) => {
      throw e instanceof RuntimeProbeError ? new InstallError(e.message) : e;
    });
    choice = chooseCniVersion(f.cniVersion, runtime);
    conflist = await resolveConflist({ ...f, cniVersion: choice.version });
    if (f.conflist !== undefined) choice = { version: conflist.cniVersion, why: "--conflist" };
    const source = f.conflist !== undefined ? `--conflist ${f.conflist}` : "--cni-version";
    const tooNew = cniVersionWarning(conflist.cniVersion, runtime, source);
    if (tooNew) warnings.push(tooNew);
    const missing = missingPlugins(conflist, f.binDir.replace(/\/$/, ""));
    if (missing.length > 0) {
      const message = missingPluginsMessage(
        missing,
        f.binDir.replace(/\/$/, ""),
        f.conflist !== undefined ? `--conflist ${f.conflist}` : "--chain",
      );
      if (!f.allowMissingPlugins) throw new InstallError(message);
      warnings.push(message.replace(/; or pass --allow-missing-plugins .*$/, "."));
    }
  }
  const source = f.skipBinary ? undefined : await pluginSource();
  const actions: InstallAction[] = [];

  const binPath = `${f.binDir.replace(/\/$/, "")}/vpcni`;
  for (const { path, bytes, what } of source?.bundles ?? []) {
    // Written before the launcher that runs them, so the launcher never names a missing file.
    const detail = `${what} (${bytes.length} bytes)`;
    const old = await readIfExists(path);
    if (old && sameBytes(old, bytes)) {
      actions.push({ what: "bundle", path, result: "unchanged", detail });
    } else if (f.dryRun) {
      actions.push({ what: "bundle", path, result: "would write", detail });
    } else {
      await writeAtomic(path, bytes, 0o644);
      actions.push({ what: "bundle", path, result: "written", detail });
    }
  }
  if (source?.runtime) {
    // The whole tree is in place under its final name before the launcher names it.
    const r = await installRuntimeTree(
      binPath.slice(0, -"/vpcni".length),
      source.runtime,
      !!f.dryRun,
    );
    actions.push({ what: "runtime", ...r });
  }
  if (source) {
    const detail = source.kind === "executable"
      ? `copy of ${source.from} (${source.bytes.length} bytes)`
      : source.kind === "runtime"
      ? `launcher of runtime ${source.runtime!.info.id} (${source.bytes.length} bytes)`
      : `launcher ${
        source.launcherForm ?? "script"
      } running ${source.from} from source, not compiled`;
    const old = await readIfExists(binPath);
    if (old && sameBytes(old, source.bytes)) {
      actions.push({ what: "binary", path: binPath, result: "unchanged", detail });
    } else if (f.dryRun) {
      actions.push({ what: "binary", path: binPath, result: "would install", detail });
    } else {
      await writeAtomic(binPath, source.bytes, 0o755);
      actions.push({ what: "binary", path: binPath, result: "installed", detail });
    }
    if (!f.dryRun) {
      // Trees left from runtime installs: keep the one now named and the one just replaced.
      const previous = old ? readStamp(old)?.runtimeDir.replace(/^.*\//, "") : undefined;
      const removed = await removeOldTrees(binPath.slice(0, -"/vpcni".length), [
        source.runtime?.info.id,
        previous,
      ]);
      actions.push(...removed.map((r) => ({ what: "runtime" as const, ...r })));
    }
  } else {
    actions.push({ what: "binary", path: binPath, result: "skipped", detail: "--skip-binary" });
  }

  if (conflist) {
    const bytes = new TextEncoder().encode(JSON.stringify(conflist, null, 2) + "\n");
    const detail = `network "${conflist.name}", plugins ${
      conflist.plugins.map((p) => p.type).join(" → ")
    }, cniVersion ${conflist.cniVersion}: ${choice?.why}`;
    const old = await readIfExists(f.conflistFile);
    if (old && sameBytes(old, bytes)) {
      actions.push({ what: "conflist", path: f.conflistFile, result: "unchanged", detail });
    } else if (f.dryRun) {
      actions.push({
        what: "conflist",
        path: f.conflistFile,
        result: "would write",
        detail,
        content: new TextDecoder().decode(bytes),
      });
    } else {
      await writeAtomic(f.conflistFile, bytes, 0o644);
      actions.push({ what: "conflist", path: f.conflistFile, result: "written", detail });
    }
  } else {
    actions.push({
      what: "conflist",
      path: f.conflistFile,
      result: "skipped",
      detail: "--skip-conflist",
    });
  }
  return { actions, warnings, cniVersion: choice };
}

function collect(value: string, prev: string[]): string[] {
  return [...prev, value];
}

/** Adds the `install` verb to the program. */
export function registerInstall(program: Command): void {
  program.command("install")
    .description(
      "install the vpcni binary and conflist into the CNI directories (atomic, idempotent)",
    )
    .option("--bin-dir <dir>", "CNI plugin directory", DEFAULT_CNI_BIN_DIR)
    .option("--conflist-file <path>", "conflist to write", DEFAULT_CNI_CONF_FILE)
    .option("--conflist <file>", "install this conflist (JSON/YAML) instead of generating one")
    .option("--config <file>", "daemon config file: take datapath and socket from it")
    .option("--network-name <name>", "network name in the conflist", "vpcni")
    .option(
      "--datapath <kind>",
      `datapath: ${DATAPATHS.join(" | ")} (default: --config's, else ipvlan-l2)`,
    )
    .option("--mtu <n>", "pod interface MTU", "9001")
    .option("--service-cidr <cidr>", "service CIDR routed via the host (repeatable)", collect, [])
    .option("--socket <path>", `IPAM daemon socket (default: --config's, else ${DEFAULT_SOCKET})`)
    .option("--host-veth-prefix <p>", "host-side veth name prefix", "vpc")
    .option(
      "--chain <plugins>",
      `comma-separated plugins to chain after vpcni: ${Object.keys(CHAINABLE).join(", ")}`,
    )
    .option(
      "--cni-version <v>",
      `cniVersion of the conflist: auto (the newest the runtime takes) or ${
        SUPPORTED_CNI_VERSIONS.join(", ")
      }`,
      "auto",
    )
    .option(
      "--containerd <path>",
      "containerd binary to ask for the CNI versions it takes (default: found on PATH, /usr/bin, /host/usr/bin, …)",
    )
    .option(
      "--allow-missing-plugins",
      "write the conflist even when a chained plugin is not in --bin-dir (warn instead)",
    )
    .option("--skip-binary", "do not install the binary")
    .option("--skip-conflist", "do not write the conflist")
    .option("--dry-run", "print what would be done and change nothing")
    .option("--json", "machine-readable output")
    .addHelpText(
      "after",
      `
Every flag is checked before anything is written; a bad one exits 2.

Examples:
  vpcni install --dry-run                        show the conflist, write nothing
  vpcni install --datapath veth --service-cidr 10.100.0.0/16 --chain portmap
  vpcni install --config /etc/vpcni/config.yaml  datapath and socket from there
  vpcni install --conflist my.conflist --skip-binary`,
    )
    .action(async (f: InstallFlags) => {
      let report: InstallReport;
      try {
        report = await install(f);
      } catch (e) {
        if (e instanceof InstallError || e instanceof BundleError) {
          console.error(`vpcni install: ${e.message}`);
          Deno.exitCode = e instanceof InstallError ? 2 : 1; // a usage error, or the machine's
          return;
        }
        throw e;
      }
      const { actions, warnings, cniVersion } = report;
      for (const w of warnings) console.error(`vpcni install: warning: ${w}`);
      if (f.json) {
        console.log(JSON.stringify({ dryRun: !!f.dryRun, actions, warnings, cniVersion }, null, 2));
        return;
      }
      for (const a of actions) {
        // One line when it fits 80 columns; otherwise the detail goes under it, wrapped.
        const head = `${a.what.padEnd(8)} ${a.path}: ${a.result}`;
        const oneLine = `${head} (${a.detail})`;
        console.log(
          oneLine.length <= 80 ? oneLine : [head, ...wrapDetail(`(${a.detail})`, 9)].join("\n"),
        );
        if (a.content) console.log(a.content.replace(/^/gm, "  ").trimEnd());
      }
    });
}

/**
 * Wraps `text` at spaces into lines of at most 80 columns, each indented by `indent`. A word
 * longer than a line (a deep path) gets a line of its own rather than being cut.
 */
export function wrapDetail(text: string, indent: number): string[] {
  const pad = " ".repeat(indent);
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line && pad.length + line.length + 1 + word.length > 80) {
      lines.push(pad + line);
      line = word;
    } else {
      line = line ? `${line} ${word}` : word;
    }
  }
  if (line) lines.push(pad + line);
  return lines;
}
