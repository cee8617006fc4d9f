/**
 * The CNI side of the node: the conflist is present, is the one the runtime picks, parses
 * with the plugin's own parser; the binaries it names are installed and vpcni answers the
 * CNI VERSION command.
 *
 * @module
 */
import { parseConfig } from "../cni/config.ts";
import { CniError } from "../cni/errors.ts";
import { runPlugin } from "../cni/delegate.ts";
import type { CheckResult } from "./report.ts";

/** Files a runtime considers network configurations, as libcni does. */
const CONF_EXT = /\.(conf|conflist|json)$/;

function dirOf(path: string): string {
  return path.replace(/\/[^/]*$/, "") || "/";
}

async function isExecutable(path: string): Promise<boolean> {
  try {
    const st = await Deno.stat(path);
    return st.isFile && ((st.mode ?? 0) & 0o111) !== 0;
  } catch {
    return false;
  }
}

/** Runs the installed plugin's CNI VERSION command; returns the versions it speaks. */
export async function pluginVersions(bin: string, timeoutMs: number): Promise<string[]> {
  const out = await runPlugin(
    bin,
    { CNI_COMMAND: "VERSION", PATH: "/usr/sbin:/usr/bin:/sbin:/bin" },
    new TextEncoder().encode('{"cniVersion":"1.0.0"}'),
    timeoutMs,
  );
  const text = new TextDecoder().decode(out.stdout).trim();
  const parsed = JSON.parse(text) as { supportedVersions?: string[]; msg?: string };
  if (!Array.isArray(parsed.supportedVersions)) {
    throw new Error(parsed.msg ?? `unexpected answer ${text.slice(0, 80)}`);
  }
  return parsed.supportedVersions;
}

/** The conflist and binaries check. */
export async function checkCniConfig(
  conflistFile: string,
  binDir: string,
  timeoutMs: number,
): Promise<CheckResult> {
  const base = { id: "cni-config", title: "CNI config" };
  const reinstall = `vpcni install --conflist-file ${conflistFile} --bin-dir ${binDir}`;
  let text: string;
  try {
    text = await Deno.readTextFile(conflistFile);
  } catch (e) {
    return {
      ...base,
      status: "fail",
      found: `${conflistFile}: ${
        e instanceof Deno.errors.NotFound ? "missing" : (e as Error).message
      }`,
      fix: `${reinstall} (the DaemonSet's init container does this)`,
    };
  }
  const problems: string[] = [];
  let list: { cniVersion?: unknown; name?: unknown; plugins?: unknown } = {};
  try {
    list = JSON.parse(text);
  } catch (e) {
    problems.push(`${conflistFile} is not JSON: ${(e as Error).message}`);
  }
  const plugins = Array.isArray(list.plugins) ? list.plugins as Record<string, unknown>[] : [];
  if (problems.length === 0 && plugins.length === 0) {
    problems.push(`${conflistFile}: no "plugins" list`);
  }
  let ours = 0;
  plugins.forEach((p, i) => {
    const isOurs = p?.type === "vpcni" ||
      (p?.ipam as { type?: unknown } | undefined)?.type === "vpcni";
    if (!isOurs) return;
    ours++;
    try {
      parseConfig({ ...p, cniVersion: list.cniVersion, name: list.name });
    } catch (e) {
      const msg = e instanceof CniError
        ? `${e.message}${e.details ? ` (${e.details})` : ""}`
        : String(e);
      problems.push(`plugins[${i}]: ${msg}`);
    }
  });
  if (problems.length === 0 && ours === 0) problems.push(`${conflistFile} does not use vpcni`);

  // The runtime takes the first configuration file by name: ours must be it.
  try {
    const names = [...Deno.readDirSync(dirOf(conflistFile))].filter((e) => CONF_EXT.test(e.name))
      .map((e) => e.name).sort();
    const mine = conflistFile.slice(dirOf(conflistFile).length + 1);
    if (names.length > 0 && names[0] !== mine) {
      problems.push(
        `${names[0]} sorts before ${mine} in ${dirOf(conflistFile)}: the runtime uses ${names[0]}`,
      );
    }
  } catch { /* reading the dir failed: the file read above would have said */ }

  const missingBins: string[] = [];
  const types = new Set<string>();
  for (const p of plugins) {
    if (typeof p?.type === "string") types.add(p.type);
    const ipamType = (p?.ipam as { type?: unknown } | undefined)?.type;
    if (typeof ipamType === "string") types.add(ipamType);
  }
  for (const t of types) {
    if (!(await isExecutable(`${binDir}/${t}`))) missingBins.push(t);
  }
  if (missingBins.length > 0) {
    problems.push(`not installed (or not executable) in ${binDir}: ${missingBins.join(", ")}`);
  } else if (types.has("vpcni")) {
    try {
      const v = await pluginVersions(`${binDir}/vpcni`, timeoutMs);
      if (!v.includes(String(list.cniVersion))) {
        problems.push(
          `${binDir}/vpcni does not speak cniVersion ${list.cniVersion} (it speaks ${
            v.join(", ")
          })`,
        );
      }
    } catch (e) {
      problems.push(`${binDir}/vpcni does not answer CNI VERSION: ${(e as Error).message}`);
    }
  }

  if (problems.length > 0) {
    return {
      ...base,
      status: "fail",
      found: problems[0],
      details: problems.length > 1 ? problems : undefined,
      fix: `${reinstall} rewrites both atomically (remove or rename any file that sorts first)`,
    };
  }
  return {
    ...base,
    status: "ok",
    found: `${conflistFile} valid (${
      plugins.map((p) => p.type).join(" → ")
    }); binaries in ${binDir}`,
  };
}
