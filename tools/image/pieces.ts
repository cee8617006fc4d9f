/**
 * The pieces the vpcni image is made of, each found or built here: the Deno runtime from
 * npm, the shared libraries an executable loads (by `ldd`), and the launcher
 * (tools/image/launcher.c, built statically with the C compiler).
 *
 * @module
 */

const decoder = new TextDecoder();

async function output(cmd: string, args: string[], env?: Record<string, string>) {
  try {
    const out = await new Deno.Command(cmd, { args, env, stdout: "piped", stderr: "piped" })
      .output();
    return {
      ok: out.success,
      stdout: decoder.decode(out.stdout),
      stderr: decoder.decode(out.stderr),
    };
  } catch (e) {
    return { ok: false, stdout: "", stderr: (e as Error).message };
  }
}

/** A build step could not be done; the message says what to install or set. */
export class ImageError extends Error {
  /** Creates the error; `message` is printed as is. */
  constructor(message: string) {
    super(message);
    this.name = "ImageError";
  }
}

/** The npm package that carries the Deno binary for this machine (deno's optional deps). */
export function denoPlatformPackage(): string {
  const arch = Deno.build.arch === "aarch64" ? "arm64" : "x64";
  return `@deno/linux-${arch}-glibc`;
}

/** Where the `deno` npm package may keep the real binary under a `node_modules` root. */
export function npmDenoCandidates(nodeModules: string): string[] {
  return [
    `${nodeModules}/deno/deno`,
    `${nodeModules}/deno/node_modules/${denoPlatformPackage()}/deno`,
    `${nodeModules}/${denoPlatformPackage()}/deno`,
  ];
}

/** True when `path` is an ELF file that says it is Deno `version`. */
async function isDeno(path: string, version: string): Promise<boolean> {
  try {
    const head = new Uint8Array(4);
    const f = await Deno.open(path, { read: true });
    try {
      await f.read(head);
    } finally {
      f.close();
    }
    if (decoder.decode(head) !== "\x7fELF") return false; // the npm shim is a script
  } catch {
    return false;
  }
  const r = await output(path, ["--version"]);
  return r.ok && r.stdout.startsWith(`deno ${version} `);
}

/**
 * The Deno runtime binary of `version` as the `deno` npm package installs it: from the
 * global npm root, else installed into `cacheDir` with npm (`npm install --prefix`).
 */
export async function npmDenoRuntime(
  version: string,
  cacheDir: string,
): Promise<{ path: string; how: string }> {
  const root = await output("npm", ["root", "-g"]);
  if (root.ok) {
    for (const p of npmDenoCandidates(root.stdout.trim())) {
      if (await isDeno(p, version)) return { path: p, how: `npm global (${root.stdout.trim()})` };
    }
  }
  const prefix = `${cacheDir}/npm-deno-${version}`;
  for (const p of npmDenoCandidates(`${prefix}/node_modules`)) {
    if (await isDeno(p, version)) return { path: p, how: `npm, cached in ${prefix}` };
  }
  const inst = await output("npm", [
    "install",
    "--prefix",
    prefix,
    "--no-save",
    "--no-audit",
    "--no-fund",
    "--silent",
    `deno@${version}`,
  ]);
  if (!inst.ok) {
    throw new ImageError(
      `no Deno ${version} from npm: 'npm install --prefix ${prefix} deno@${version}' failed: ` +
        `${inst.stderr.trim().split("\n")[0]}. Install it (npm install -g deno@${version}) ` +
        "or build the compiled image (DENORT_BIN=/path/to/denort deno task image).",
    );
  }
  for (const p of npmDenoCandidates(`${prefix}/node_modules`)) {
    if (await isDeno(p, version)) return { path: p, how: `npm install into ${prefix}` };
  }
  throw new ImageError(
    `npm installed deno@${version} into ${prefix}, but no Deno ${version} binary is there ` +
      `(looked for ${npmDenoCandidates(`${prefix}/node_modules`).join(", ")})`,
  );
}

/**
 * The shared libraries `executable` loads, as `ldd` names them (the dynamic loader
 * included, the kernel's vDSO left out): what must sit at those paths in the image.
 */
export async function sharedLibraries(executable: string): Promise<string[]> {
  const r = await output("ldd", [executable]);
  if (!r.ok) {
    if (/not a dynamic executable/.test(r.stdout + r.stderr)) return [];
    throw new ImageError(`ldd ${executable} failed: ${r.stderr.trim()} (apt-get install libc-bin)`);
  }
  const libs = new Set<string>();
  for (const line of r.stdout.split("\n")) {
    const m = line.match(/=>\s*(\/\S+)\s+\(/) ?? line.match(/^\s*(\/\S+)\s+\(/);
    if (m) libs.add(m[1]);
    else if (/=>\s*not found/.test(line)) {
      throw new ImageError(`${executable} needs a library this machine lacks: ${line.trim()}`);
    }
  }
  return [...libs].sort();
}

/** The launcher's C source (tools/image/launcher.c). */
export const LAUNCHER_SOURCE: string = new URL("./launcher.c", import.meta.url).pathname;

/**
 * Builds the launcher, statically linked and stripped, into `out`. Needs a C compiler and
 * the static C library (Debian: gcc, libc6-dev).
 */
export async function buildLauncher(out: string): Promise<void> {
  const cc = Deno.env.get("CC") ?? "cc";
  const r = await output(cc, [
    "-Os",
    "-static",
    "-s",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-o",
    out,
    LAUNCHER_SOURCE,
  ]);
  if (!r.ok) {
    throw new ImageError(
      `could not build the launcher (${cc} ${LAUNCHER_SOURCE}): ${r.stderr.trim()}\n` +
        "install a C compiler and the static C library: apt-get install gcc libc6-dev",
    );
  }
}
