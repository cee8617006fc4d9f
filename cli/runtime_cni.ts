/**
 * Which CNI spec versions the node's container runtime takes, so `vpcni install` writes a
 * conflist the runtime can use. The trap it avoids: containerd 1.6 loads a conflist of
 * `cniVersion: 1.1.0` without complaint, then fails every pod sandbox with
 * `unsupported CNI result version "1.1.0"`, because its libcni (1.0/1.1) parses results up
 * to 1.0.0 only.
 *
 * How the runtime is found: `containerd --version`, run from `--containerd <path>` when
 * given, else the first `containerd` in PATH or in the usual host directories, also as
 * mounted into an init container under `/host`. What each version takes (the libcni it
 * vendors):
 *
 * | containerd | libcni     | newest result it parses |
 * |------------|------------|-------------------------|
 * | < 1.6      | 0.8        | 0.4.0                   |
 * | 1.6, 1.7   | 1.0 – 1.1* | 1.0.0                   |
 * | ≥ 2.0      | 1.2        | 1.1.0                   |
 *
 * (*) some late 1.7 patch releases vendor libcni 1.2; 1.0.0 is what every 1.7 takes.
 * No runtime found: 1.0.0, which containerd ≥ 1.6 and CRI-O ≥ 1.23 take.
 *
 * @module
 */

/** The runtime install found, and the newest CNI version it takes. */
export interface RuntimeCniSupport {
  runtime: "containerd";
  /** The runtime's version, `x.y.z`. */
  version: string;
  /** Where it was found. */
  path: string;
  /** The newest CNI spec version whose results it parses. */
  newestCniVersion: string;
}

/** The cniVersion written when no runtime can be asked. */
export const FALLBACK_CNI_VERSION = "1.0.0";

/** Where `containerd` is looked for when `--containerd` is not given (after PATH). */
export const CONTAINERD_DIRS: readonly string[] = [
  "/usr/bin",
  "/usr/local/bin",
  "/usr/sbin",
  "/host/usr/bin",
  "/host/usr/local/bin",
  "/host/usr/sbin",
];

/** Compares `x.y.z` versions numerically: negative, zero or positive. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split(".").map(Number);
  const pb = b.split(".").map(Number);
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * The version in `containerd --version` output (`containerd github.com/containerd/containerd
 * 1.6.20~ds1 <revision>`, `containerd containerd.io 1.7.27 <revision>`,
 * `… containerd/v2 v2.1.0 …`), or undefined.
 */
export function parseContainerdVersion(output: string): string | undefined {
  const words = output.trim().split(/\s+/);
  if (words[0] !== "containerd") return undefined;
  return words.slice(2, 3).map((w) => w.match(/^v?(\d+\.\d+\.\d+)/)?.[1])[0] ?? undefined;
}

/** The newest CNI result version containerd `version` parses (table above). */
export function containerdNewestCni(version: string): string {
  if (compareVersions(version, "1.6.0") < 0) return "0.4.0";
  if (compareVersions(version, "2.0.0") < 0) return "1.0.0";
  return "1.1.0";
}

function executable(path: string): boolean {
  try {
    const st = Deno.statSync(path);
    return st.isFile && ((st.mode ?? 0o755) & 0o111) !== 0;
  } catch {
    return false;
  }
}

/** The first `containerd` in PATH, then in {@linkcode CONTAINERD_DIRS}. */
export function findContainerd(): string | undefined {
  const dirs = [...(Deno.env.get("PATH") ?? "").split(":").filter((d) => d), ...CONTAINERD_DIRS];
  return dirs.map((d) => `${d}/containerd`).find(executable);
}

/** Why a named runtime binary could not be asked; the message names the flag. */
export class RuntimeProbeError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "RuntimeProbeError";
  }
}

/**
 * Asks containerd its version: the binary `given` (an error when it cannot be asked), or
 * the one found (undefined when none is found or it does not answer).
 */
export async function detectRuntime(given?: string): Promise<RuntimeCniSupport | undefined> {
  const path = given ?? findContainerd();
  if (!path) return undefined;
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(path, {
      args: ["--version"],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (e) {
    if (given) {
      throw new RuntimeProbeError(`--containerd: cannot run ${path}: ${(e as Error).message}`);
    }
    return undefined;
  }
  const version = out.success
    ? parseContainerdVersion(new TextDecoder().decode(out.stdout))
    : undefined;
  if (!version) {
    if (given) {
      throw new RuntimeProbeError(
        `--containerd: ${path} --version did not print a containerd version (exit ${out.code})`,
      );
    }
    return undefined;
  }
  return { runtime: "containerd", version, path, newestCniVersion: containerdNewestCni(version) };
}
