/**
 * What `vpcni install` checks about the node before it writes a conflist: the cniVersion the
 * container runtime can take (cli/runtime_cni.ts), and whether every other plugin the
 * conflist names (`--chain portmap,bandwidth`, or a `--conflist` file's) is in the CNI bin
 * dir. Without one of those the runtime loads the conflist and then fails every pod ADD
 * with `failed to find plugin "portmap" in path`, so install refuses (exit 2, nothing
 * written), unless `--allow-missing-plugins` turns the refusal into a warning (another
 * DaemonSet will put them there, for instance).
 *
 * vpcni does not ship the reference plugins: they are Go programs of their own release
 * cycle, which node images (the EKS AMI among them) and distributions already carry.
 *
 * @module
 */
import type { Conflist } from "./conflist.ts";
import { compareVersions, FALLBACK_CNI_VERSION, type RuntimeCniSupport } from "./runtime_cni.ts";
import { SUPPORTED_CNI_VERSIONS } from "../cni/versions.ts";

/** The cniVersion install writes, and why. */
export interface CniVersionChoice {
  version: string;
  why: string;
}

/**
 * Picks the conflist's cniVersion: `requested` as given, or for `auto` the newest version
 * both vpcni and the runtime take (the fallback when no runtime was found).
 */
export function chooseCniVersion(
  requested: string,
  runtime: RuntimeCniSupport | undefined,
): CniVersionChoice {
  if (requested !== "auto") return { version: requested, why: "--cni-version" };
  if (!runtime) {
    return {
      version: FALLBACK_CNI_VERSION,
      why: "no containerd found to ask; taken by containerd ≥ 1.6 and CRI-O ≥ 1.23",
    };
  }
  const ours = SUPPORTED_CNI_VERSIONS[SUPPORTED_CNI_VERSIONS.length - 1];
  const version = compareVersions(runtime.newestCniVersion, ours) < 0
    ? runtime.newestCniVersion
    : ours;
  return {
    version,
    why: `containerd ${runtime.version} (${runtime.path}) takes up to ${runtime.newestCniVersion}`,
  };
}

/**
 * A warning when `cniVersion` is newer than the runtime takes (a forced `--cni-version` or
 * a `--conflist` file), saying what will happen and the fix; undefined when it fits.
 */
export function cniVersionWarning(
  cniVersion: string,
  runtime: RuntimeCniSupport | undefined,
  source: string,
): string | undefined {
  if (!runtime || compareVersions(cniVersion, runtime.newestCniVersion) <= 0) return undefined;
  return `${source}: cniVersion ${cniVersion} is newer than containerd ${runtime.version} ` +
    `(${runtime.path}) takes (up to ${runtime.newestCniVersion}): it will load the conflist, ` +
    `then fail every pod sandbox with 'unsupported CNI result version "${cniVersion}"'. ` +
    `Use --cni-version ${runtime.newestCniVersion} (or auto, the default).`;
}

/** Plugin types the conflist names besides vpcni (chained plugins, delegated IPAM). */
export function otherPlugins(c: Conflist): string[] {
  const types = new Set<string>();
  for (const p of c.plugins) {
    if (p.type !== "vpcni") types.add(p.type);
    const ipam = (p.ipam as { type?: unknown } | undefined)?.type;
    if (typeof ipam === "string" && ipam !== "vpcni") types.add(ipam);
  }
  return [...types];
}

/** The plugins of {@linkcode otherPlugins} that are not executables in `binDir`. */
export function missingPlugins(c: Conflist, binDir: string): string[] {
  return otherPlugins(c).filter((t) => {
    try {
      const st = Deno.statSync(`${binDir}/${t}`);
      return !st.isFile || ((st.mode ?? 0o755) & 0o111) === 0;
    } catch {
      return true;
    }
  });
}

/** Says which plugins are missing, what that breaks, and where to get them. */
export function missingPluginsMessage(missing: string[], binDir: string, source: string): string {
  const arch = Deno.build.arch === "aarch64" ? "arm64" : "amd64";
  return `${source}: ${missing.map((m) => `"${m}"`).join(", ")} ${
    missing.length === 1 ? "is" : "are"
  } not in ${binDir}, and the runtime would fail every pod ADD without ${
    missing.length === 1 ? "it" : "them"
  }. They are the CNI reference plugins: unpack ` +
    `cni-plugins-linux-${arch}-v1.x.tgz from https://github.com/containernetworking/plugins/releases ` +
    `into ${binDir}, or copy them from your distribution's package (Debian: ` +
    `containernetworking-plugins, in /usr/lib/cni); or pass --allow-missing-plugins when ` +
    `something else installs them.`;
}
