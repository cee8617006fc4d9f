/**
 * `deno task compile`: builds `dist/vpcni`, the one executable that is the CNI plugin, the
 * IPAM daemon and the doctor.
 *
 * Steps, each of which stops the build with a message naming what to fix:
 * 1. module graph: `deno info` of the entrypoint and of the CLI module that main.ts imports
 *    through a computed specifier (so `deno compile` cannot see it without `--include`);
 *    the plugin's hot path must not reach any npm package;
 * 2. type check (`deno check`), unless `--no-check`;
 * 3. `deno compile` with the permissions the program needs and nothing that prompts;
 * 4. the built file is run once (`version --json`) to prove the runtime it was built on
 *    (denort) is a working denort of the same Deno version.
 *
 * `deno compile` downloads denort from Deno's release host. Where that host cannot be
 * reached, set `DENORT_BIN` to a denort of the same version, or put the release zip into
 * Deno's download cache; the error says both.
 *
 * Usage: `deno task compile [--output FILE] [--no-check] [--dry-run]`
 *
 * @module
 */
import { parseArgs } from "node:util";
import { RUNTIME_PERMISSIONS, RUNTIME_V8_FLAGS } from "../cli/launcher.ts";

/**
 * Permission flags baked into the executable: what the program needs, and no prompts.
 * `--allow-sys=osRelease,uid,homedir` is there because the AWS SDK puts the OS release into
 * its user agent, and, when HOME is unset (a systemd unit, a bare container), asks the OS for
 * the user's home directory to look for ~/.aws files; it fails every EC2 call without them
 * (both found running the daemon with exactly these flags). Nothing else of `sys` is granted. The same list is what the image's launcher
 * and the from-source launcher grant (cli/launcher.ts).
 */
export const COMPILE_PERMISSIONS: readonly string[] = RUNTIME_PERMISSIONS;

/**
 * V8 flags baked into the executable. `--lite-mode` (no optimizing compiler) and a full GC
 * after start-up and each EC2 re-sync (`--expose-gc`, see ipam/memory.ts) took the daemon
 * from 125 to 99 MiB RSS after an hour of churn (bench/ipam); the plugin, which lives for
 * one request, never reaches optimized code anyway.
 */
export const COMPILE_V8_FLAGS: string = RUNTIME_V8_FLAGS;

/** Modules main.ts loads through computed specifiers, which `deno compile` cannot trace. */
export const COMPILE_INCLUDES: readonly string[] = ["cli/program.ts"];

/**
 * npm package folders that are not code but that `deno compile` 2.9 tries to analyse, and
 * overflows its stack on: bintrees (pulled in by prom-client → tdigest) ships a 2 MB
 * extension-less benchmark file under `test/`. Excluding them changes nothing at run time.
 */
export const NPM_NON_CODE_DIRS: readonly { pkg: string; dir: string }[] = [
  { pkg: "bintrees", dir: "test" },
];

/** The repository root (this file lives in `tools/`). */
export const REPO_ROOT: string = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

/** What one build should produce. */
export interface CompileOptions {
  /** Output path, relative to the repo root or absolute (default `dist/vpcni`). */
  output: string;
  /** Entrypoint (default `main.ts`). */
  entry: string;
  /** Extra modules to embed (default {@linkcode COMPILE_INCLUDES}). */
  includes: readonly string[];
  /** Paths left out of the embedded files (see {@linkcode npmExcludes}). */
  excludes?: readonly string[];
}

/** The default build. */
export const DEFAULT_COMPILE: CompileOptions = {
  output: "dist/vpcni",
  entry: "main.ts",
  includes: COMPILE_INCLUDES,
};

/**
 * The `deno compile` argv (without the `deno` itself). Type checking is done as its own
 * step beforehand, so compile is told to skip it.
 */
export function compileArgs(o: CompileOptions = DEFAULT_COMPILE): string[] {
  return [
    "compile",
    ...COMPILE_PERMISSIONS,
    COMPILE_V8_FLAGS,
    ...o.includes.flatMap((m) => ["--include", m]),
    ...(o.excludes ?? []).flatMap((p) => ["--exclude", p]),
    "--no-check",
    "--output",
    o.output,
    o.entry,
  ];
}

/** The Rust target triple of this Deno, which names the denort release asset. */
export function denortTarget(): string {
  return Deno.build.target;
}

/** Where Deno would download denort from for this version and target. */
export function denortUrl(version: string = Deno.version.deno): string {
  return `https://dl.deno.land/release/v${version}/denort-${denortTarget()}.zip`;
}

/** Where Deno keeps a downloaded denort zip, so a copy placed there is used offline. */
export function cachedDenortZip(denoDir: string, version: string = Deno.version.deno): string {
  return `${denoDir}/dl/release/v${version}/denort-${denortTarget()}.zip`;
}

/** The folders of {@linkcode NPM_NON_CODE_DIRS} present in Deno's npm cache, every version. */
export function npmExcludes(denoDir: string): string[] {
  const found: string[] = [];
  for (const { pkg, dir } of NPM_NON_CODE_DIRS) {
    const base = `${denoDir}/npm/registry.npmjs.org/${pkg}`;
    let versions: Deno.DirEntry[];
    try {
      versions = [...Deno.readDirSync(base)].filter((e) => e.isDirectory);
    } catch {
      continue;
    }
    for (const v of versions) {
      try {
        if (Deno.statSync(`${base}/${v.name}/${dir}`).isDirectory) {
          found.push(`${base}/${v.name}/${dir}`);
        }
      } catch {
        // this version has no such folder
      }
    }
  }
  return found.sort();
}

/** How the base runtime will be found. */
export type DenortSource =
  | { kind: "env"; path: string }
  | { kind: "cache"; path: string }
  | { kind: "download"; url: string; cachePath: string };

/**
 * Decides where denort comes from. A `DENORT_BIN` that does not name an executable file is
 * refused here, before anything is built.
 */
export function resolveDenort(
  env: Record<string, string | undefined>,
  denoDir: string,
): DenortSource {
  const fromEnv = env["DENORT_BIN"];
  if (fromEnv !== undefined && fromEnv !== "") {
    let st: Deno.FileInfo;
    try {
      st = Deno.statSync(fromEnv);
    } catch {
      throw new CompileError(
        `DENORT_BIN=${fromEnv}: no such file.\n${denortHelp()}`,
      );
    }
    if (!st.isFile || ((st.mode ?? 0o755) & 0o111) === 0) {
      throw new CompileError(
        `DENORT_BIN=${fromEnv}: not an executable file (chmod +x it).\n${denortHelp()}`,
      );
    }
    return { kind: "env", path: fromEnv };
  }
  const cachePath = cachedDenortZip(denoDir);
  try {
    Deno.statSync(cachePath);
    return { kind: "cache", path: cachePath };
  } catch {
    return { kind: "download", url: denortUrl(), cachePath };
  }
}

/** The instructions printed whenever denort cannot be had. */
export function denortHelp(denoDir: string = defaultDenoDir()): string {
  const v = Deno.version.deno;
  return [
    `deno compile needs denort ${v} (the Deno runtime without the toolchain) for ${denortTarget()},`,
    `and downloads it from dl.deno.land. Where that host cannot be reached, provide it either way:`,
    `  1. on a machine with access: curl -fLO ${denortUrl(v)}`,
    `     unzip denort-${denortTarget()}.zip   # yields the file 'denort'`,
    `     copy 'denort' here, then: DENORT_BIN=/path/to/denort deno task compile`,
    `  2. or copy the zip itself to ${cachedDenortZip(denoDir, v)}`,
    `     and run: deno task compile`,
    `The denort must be of Deno ${v} exactly (this deno is ${v}); the build checks it.`,
  ].join("\n");
}

/** A build failure whose message says what to do. */
export class CompileError extends Error {
  /** Creates the error; `message` is printed as is. */
  constructor(message: string) {
    super(message);
    this.name = "CompileError";
  }
}

/** Deno's cache directory, as `deno info` reports it. */
export function defaultDenoDir(): string {
  const fromEnv = Deno.env.get("DENO_DIR");
  if (fromEnv) return fromEnv;
  const xdg = Deno.env.get("XDG_CACHE_HOME");
  if (xdg) return `${xdg}/deno`;
  return `${Deno.env.get("HOME") ?? "/root"}/.cache/deno`;
}

/** True when deno's compile error says it failed to fetch the base runtime. */
export function isDenortFetchFailure(stderr: string): boolean {
  return /dl\.deno\.land|denort|Setting up base binary/i.test(stderr);
}

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

async function deno(args: string[], env?: Record<string, string>): Promise<Ran> {
  const out = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: REPO_ROOT,
    env: { NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** One module of `deno info --json`'s graph. */
interface InfoModule {
  specifier: string;
  error?: string;
  kind?: string;
}

/**
 * Step 1: the module graph of each root resolves, and the CNI plugin's hot path reaches no
 * npm package. Returns the number of modules seen.
 */
export async function checkModuleGraph(
  roots: readonly string[],
  hotPath = "cni/plugin.ts",
): Promise<number> {
  let seen = 0;
  for (const root of roots) {
    const r = await deno(["info", "--json", root]);
    if (r.code !== 0) {
      throw new CompileError(`module graph of ${root} does not resolve:\n${r.stderr.trim()}`);
    }
    const info = JSON.parse(r.stdout) as { modules: InfoModule[] };
    const broken = info.modules.filter((m) => m.error);
    if (broken.length > 0) {
      throw new CompileError(
        `module graph of ${root} has unresolved modules:\n` +
          broken.map((m) => `  ${m.specifier}: ${m.error}`).join("\n"),
      );
    }
    seen += info.modules.length;
  }
  const hot = await deno(["info", "--json", hotPath]);
  if (hot.code === 0) {
    // `npmPackages` lists the whole lockfile; the modules list is what the path really loads.
    const info = JSON.parse(hot.stdout) as { modules: InfoModule[] };
    const npm = info.modules.filter((m) => m.kind === "npm" || m.specifier.startsWith("npm:"));
    if (npm.length > 0) {
      throw new CompileError(
        `${hotPath} (the plugin's hot path) reaches npm packages: ` +
          `${npm.map((m) => m.specifier).join(", ")}; every pod ADD would pay npm ` +
          `resolution. Move that import off the plugin path.`,
      );
    }
  }
  return seen;
}

/** Step 2: type check the entrypoint and the computed-specifier modules. */
export async function typeCheck(roots: readonly string[]): Promise<void> {
  const r = await deno(["check", ...roots]);
  if (r.code !== 0) {
    throw new CompileError(
      `type check failed (deno check ${roots.join(" ")}):\n${r.stderr.trim()}`,
    );
  }
}

/** Step 3: run `deno compile`. A failure to fetch denort becomes {@linkcode denortHelp}. */
export async function runCompile(o: CompileOptions, source: DenortSource): Promise<void> {
  const env: Record<string, string> = source.kind === "env" ? { DENORT_BIN: source.path } : {};
  const r = await deno(compileArgs(o), env);
  if (r.code === 0) return;
  removeCompileLeftovers(o.output);
  if (source.kind === "download" && isDenortFetchFailure(r.stderr)) {
    throw new CompileError(`could not download denort from ${source.url}.\n${denortHelp()}`);
  }
  throw new CompileError(`deno compile failed:\n${r.stderr.trim()}`);
}

/** Removes the `<output>.tmp-*` files a crashed `deno compile` leaves behind. */
export function removeCompileLeftovers(output: string): void {
  const path = output.startsWith("/") ? output : `${REPO_ROOT}/${output}`;
  const dir = path.replace(/\/[^/]*$/, "");
  const base = path.slice(dir.length + 1);
  try {
    for (const e of Deno.readDirSync(dir)) {
      if (e.isFile && e.name.startsWith(`${base}.tmp-`)) Deno.removeSync(`${dir}/${e.name}`);
    }
  } catch {
    // no output directory: nothing was left
  }
}

/**
 * Step 4: the output runs and reports the same Deno version. Anything else (for instance a
 * DENORT_BIN that is not a denort at all, which `deno compile` accepts without looking)
 * deletes the output and fails.
 */
export async function verifyExecutable(path: string): Promise<string> {
  let ran: Ran;
  try {
    const out = await new Deno.Command(path, {
      args: ["version", "--json"],
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).output();
    const dec = new TextDecoder();
    ran = { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  } catch (err) {
    ran = { code: -1, stdout: "", stderr: String(err) };
  }
  let reported: string | undefined;
  try {
    reported = (JSON.parse(ran.stdout) as { deno?: string }).deno;
  } catch {
    reported = undefined;
  }
  if (ran.code !== 0 || reported !== Deno.version.deno) {
    await Deno.remove(path).catch(() => {});
    throw new CompileError(
      `the built ${path} does not run as vpcni on Deno ${Deno.version.deno} ` +
        `(exit ${ran.code}, reported deno ${reported ?? "nothing"}); the denort it was built ` +
        `on is not a denort ${Deno.version.deno}. Removed it.\n${denortHelp()}`,
    );
  }
  return reported;
}

/** Runs every step; returns the process exit code. */
export async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      output: { type: "string", short: "o", default: DEFAULT_COMPILE.output },
      "no-check": { type: "boolean", default: false },
      "dry-run": { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(
      "usage: deno task compile [--output FILE] [--no-check] [--dry-run]\n\n" + denortHelp(),
    );
    return 0;
  }
  const opts: CompileOptions = {
    ...DEFAULT_COMPILE,
    output: values.output,
    excludes: npmExcludes(defaultDenoDir()),
  };
  const roots = [opts.entry, ...opts.includes];
  const step = (s: string) => console.error(`compile: ${s}`);
  try {
    const source = resolveDenort(Deno.env.toObject(), defaultDenoDir());
    if (values["dry-run"]) {
      console.log(`deno ${compileArgs(opts).join(" ")}`);
      console.log(
        source.kind === "download"
          ? `denort: would download ${source.url}`
          : `denort: ${source.path} (${source.kind === "env" ? "DENORT_BIN" : "cache"})`,
      );
      return 0;
    }
    const n = await checkModuleGraph(roots);
    step(`module graph ok (${n} modules from ${roots.join(", ")}; plugin path free of npm)`);
    if (values["no-check"]) {
      step("type check skipped (--no-check)");
    } else {
      await typeCheck(roots);
      step("type check ok");
    }
    const outPath = opts.output.startsWith("/") ? opts.output : `${REPO_ROOT}/${opts.output}`;
    await Deno.mkdir(outPath.replace(/\/[^/]*$/, ""), { recursive: true });
    step(
      `deno ${compileArgs(opts).join(" ")}` +
        (source.kind === "download" ? "" : `  [denort: ${source.path}]`),
    );
    await runCompile(opts, source);
    const v = await verifyExecutable(outPath);
    step(`built ${opts.output} (runs on deno ${v})`);
    return 0;
  } catch (err) {
    if (err instanceof CompileError) {
      console.error(`compile: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
