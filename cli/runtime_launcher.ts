/**
 * vpcni shipped as the Deno runtime plus its bundled program (the image built without
 * denort, see tools/image.ts), and how `install` puts that on a host that has no Deno.
 *
 * Layout, the same in the image (`/usr/local/bin`) and in the CNI bin dir:
 *
 *     vpcni                          the launcher (tools/image/launcher.c, static)
 *     vpcni.d/<version>-<hash>/      one runtime tree per build
 *       deno                         the Deno runtime
 *       vpcni.js                     the whole program, bundled
 *       vpcni-plugin.js              the CNI plugin's thin client, bundled (the pod hot path)
 *       vpcni-plugin-full.js         the whole CNI plugin, bundled (no npm), loaded by the thin
 *                                    one when it hands over (cni/thin.ts)
 *       runtime.json                 what this tree is (version, id, deno)
 *
 * The launcher names its tree in a stamp block inside the file (a relative path and the
 * deno flags), so switching versions is one rename of the launcher: the new tree is written
 * completely under a temp name, fsynced and renamed into place first, then the new launcher
 * replaces the old one by rename. A runtime that execs `vpcni` at any moment gets the old
 * launcher with its complete old tree, or the new one with its complete new tree.
 *
 * @module
 */
import { VPCNI_VERSION } from "../base/version.ts";
import { fsyncPath } from "../base/fsync.ts";

/** The directory next to the launcher that holds the runtime trees. */
export const RUNTIME_PARENT = "vpcni.d";

/** The files of one runtime tree, with their modes. */
export const RUNTIME_FILES: readonly { name: string; mode: number }[] = [
  { name: "deno", mode: 0o755 },
  { name: "vpcni.js", mode: 0o644 },
  { name: "vpcni-plugin.js", mode: 0o644 },
  { name: "vpcni-plugin-full.js", mode: 0o644 },
  { name: "runtime.json", mode: 0o644 },
];

/** The bytes tools/image/launcher.c starts its stamp block with. */
export const LAUNCHER_MARKER = "@@VPCNI-LAUNCHER-STAMP@@";
/** Size of the stamp block in the launcher (STAMP_SIZE in launcher.c). */
export const LAUNCHER_STAMP_SIZE = 2048;

/** What the launcher runs: its runtime tree (relative to its own dir) and the deno flags. */
export interface LauncherStamp {
  runtimeDir: string;
  flags: readonly string[];
}

/** What a runtime tree's `runtime.json` says. */
export interface RuntimeInfo {
  /** The vpcni release. */
  version: string;
  /** `<version>-<12 hex of the tree's content hash>`: the tree's directory name. */
  id: string;
  /** The Deno version of the runtime. */
  deno: string;
}

function markerOffset(bytes: Uint8Array): number {
  const m = new TextEncoder().encode(LAUNCHER_MARKER);
  outer: for (let i = 0; i + m.length <= bytes.length; i++) {
    for (let j = 0; j < m.length; j++) if (bytes[i + j] !== m[j]) continue outer;
    return i;
  }
  return -1;
}

/**
 * A copy of the launcher `template` stamped with `stamp`. Throws when `template` has no stamp
 * block or the stamp does not fit.
 */
export function stampLauncher(template: Uint8Array, stamp: LauncherStamp): Uint8Array {
  const at = markerOffset(template);
  if (at < 0) throw new Error(`not a vpcni launcher: no ${LAUNCHER_MARKER} block`);
  const strings = [LAUNCHER_MARKER, stamp.runtimeDir, ...stamp.flags, ""];
  if (strings.some((s, i) => i > 0 && i < strings.length - 1 && (s === "" || s.includes("\0")))) {
    throw new Error("launcher stamp: empty string or NUL in a field");
  }
  const block = new TextEncoder().encode(strings.join("\0") + "\0");
  if (block.length > LAUNCHER_STAMP_SIZE - 2 || at + LAUNCHER_STAMP_SIZE > template.length) {
    throw new Error(`launcher stamp too long (${block.length} of ${LAUNCHER_STAMP_SIZE} bytes)`);
  }
  const out = template.slice();
  out.fill(0, at, at + LAUNCHER_STAMP_SIZE);
  out.set(block, at);
  return out;
}

/** The stamp of a launcher, or undefined when `bytes` is not a stamped launcher. */
export function readStamp(bytes: Uint8Array): LauncherStamp | undefined {
  const at = markerOffset(bytes);
  if (at < 0) return undefined;
  const block = new TextDecoder().decode(bytes.subarray(at, at + LAUNCHER_STAMP_SIZE));
  const parts = block.split("\0");
  const end = parts.indexOf("", 1);
  const fields = parts.slice(1, end < 0 ? parts.length : end);
  if (fields.length === 0) return undefined;
  return { runtimeDir: fields[0], flags: fields.slice(1) };
}

/** A runtime tree this process runs from, and the launcher that belongs to it. */
export interface RuntimeTree {
  /** Absolute path of the tree. */
  dir: string;
  info: RuntimeInfo;
  /** The launcher's bytes (stamped for this tree). */
  launcher: Uint8Array;
}

/**
 * The runtime tree this process runs from, when it is one (its Deno sits in a dir with a
 * `runtime.json`, under `vpcni.d/`, next to a launcher): undefined otherwise.
 */
export async function thisRuntimeTree(): Promise<RuntimeTree | undefined> {
  const exec = Deno.execPath();
  const dir = exec.replace(/\/[^/]*$/, "");
  let info: RuntimeInfo;
  try {
    info = JSON.parse(await Deno.readTextFile(`${dir}/runtime.json`)) as RuntimeInfo;
  } catch {
    return undefined;
  }
  const parent = dir.replace(/\/[^/]*$/, "");
  if (!parent.endsWith(`/${RUNTIME_PARENT}`)) return undefined;
  const launcherPath = `${parent.slice(0, -RUNTIME_PARENT.length - 1)}/vpcni`;
  const launcher = await Deno.readFile(launcherPath);
  return { dir, info, launcher };
}

/** What happened to the runtime tree and old trees during an install. */
export interface RuntimeAction {
  path: string;
  result: "installed" | "unchanged" | "would install" | "removed";
  detail: string;
}

/** True when `dir` holds every runtime file with the size (and runtime.json) of `src`. */
async function sameTree(src: string, dir: string): Promise<boolean> {
  try {
    for (const f of RUNTIME_FILES) {
      const [a, b] = [Deno.statSync(`${src}/${f.name}`), Deno.statSync(`${dir}/${f.name}`)];
      if (a.size !== b.size) return false;
    }
    const [a, b] = await Promise.all(
      [src, dir].map((d) => Deno.readTextFile(`${d}/runtime.json`)),
    );
    return a === b;
  } catch {
    return false;
  }
}

/**
 * Puts the runtime tree `src` into `<binDir>/vpcni.d/<id>` unless an identical one is
 * there: each file written and fsynced under a temp dir, which is then renamed into place.
 * The launcher is not touched here; see {@linkcode removeOldTrees} for after the switch.
 */
export async function installRuntimeTree(
  binDir: string,
  src: RuntimeTree,
  dryRun: boolean,
): Promise<RuntimeAction> {
  const parent = `${binDir}/${RUNTIME_PARENT}`;
  const target = `${parent}/${src.info.id}`;
  const detail = `vpcni ${src.info.version} on deno ${src.info.deno}, from ${src.dir}`;
  if (await sameTree(src.dir, target)) return { path: target, result: "unchanged", detail };
  if (dryRun) return { path: target, result: "would install", detail };
  await Deno.mkdir(parent, { recursive: true });
  const tmp = `${parent}/.${src.info.id}.tmp-${Deno.pid}`;
  await Deno.remove(tmp, { recursive: true }).catch(() => {});
  await Deno.mkdir(tmp);
  try {
    for (const f of RUNTIME_FILES) {
      await Deno.copyFile(`${src.dir}/${f.name}`, `${tmp}/${f.name}`);
      await Deno.chmod(`${tmp}/${f.name}`, f.mode);
      await fsyncPath(`${tmp}/${f.name}`);
    }
    await fsyncPath(tmp);
    // A tree of this name that differs is a broken leftover (a complete one has the same
    // content, by its name); move it aside first, since rename cannot replace a full dir.
    try {
      Deno.statSync(target);
      const aside = `${parent}/.${src.info.id}.old-${Deno.pid}`;
      await Deno.rename(target, aside);
      await Deno.remove(aside, { recursive: true });
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
    await Deno.rename(tmp, target);
    await fsyncPath(parent);
  } catch (e) {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
    throw e;
  }
  return { path: target, result: "installed", detail };
}

/**
 * After the launcher switched: removes every tree under `<binDir>/vpcni.d` but those in
 * `keep` (the tree the launcher now names, and the one the replaced launcher named, which a
 * plugin started just before the switch may still be loading; the next install of another
 * version removes it). Leftover temp dirs of interrupted installs go too.
 */
export async function removeOldTrees(
  binDir: string,
  keep: readonly (string | undefined)[],
): Promise<RuntimeAction[]> {
  const parent = `${binDir}/${RUNTIME_PARENT}`;
  const kept = new Set(keep.filter((x): x is string => x !== undefined));
  const removed: RuntimeAction[] = [];
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(parent)];
  } catch {
    return removed;
  }
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    if (kept.has(e.name)) continue;
    const leftover = e.name.startsWith(".");
    await Deno.remove(`${parent}/${e.name}`, { recursive: true });
    removed.push({
      path: `${parent}/${e.name}`,
      result: "removed",
      detail: leftover ? "left by an interrupted install" : "an older version",
    });
  }
  if (kept.size === 0) await Deno.remove(parent).catch(() => {});
  return removed;
}

/** The tree id for content hash `hex` of this release. */
export function runtimeId(hex: string, version: string = VPCNI_VERSION): string {
  return `${version}-${hex.slice(0, 12)}`;
}
