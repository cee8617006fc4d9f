/**
 * The kernel lane (`deno task test:kernel`): runs `tests/kernel/*.kernel.ts` (or the files
 * given) inside Debian's kernel under qemu, because the host kernel has no ipvlan.
 *
 * Steps: check the host has qemu, the kernel and busybox-static; type-check and cache the test
 * files on the host (the VM sees the host's root read-only, so Deno's cache must be full
 * first); build the initramfs into `.lane/`; boot; stream `deno test` output from the serial
 * console; exit with deno's exit code.
 *
 * Usage: deno task test:kernel [--no-check] [--filter=<text>] [--timeout=<seconds>]
 *          [--memory=<MiB>] [--cpus=<n>] [--verbose] [files…]
 *
 * @module
 */
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { findLaneHost, LanePrerequisiteError } from "../../tools/kernel/prereqs.ts";
import { writeInitramfs } from "../../tools/kernel/initramfs.ts";
import { runVm } from "../../tools/kernel/vm.ts";

const REPO = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const LANE_DIR = `${REPO}/.lane`;
const KERNEL_TEST_DIR = `${REPO}/tests/kernel`;
const USAGE = "usage: deno task test:kernel [--no-check] [--filter=<text>] [--timeout=<seconds>] " +
  "[--memory=<MiB>] [--cpus=<n>] [--verbose] [files…]";

/** Options of one lane run, from the command line. */
interface LaneOptions {
  files: string[];
  typeCheck: boolean;
  filter?: string;
  timeoutMs: number;
  memoryMiB: number;
  cpus: number;
  verbose: boolean;
}

function positiveInt(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) {
    throw new Error(`--${flag}=${value}: expected a positive whole number\n${USAGE}`);
  }
  return n;
}

function parseOptions(argv: string[]): LaneOptions {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      "no-check": { type: "boolean", default: false },
      filter: { type: "string" },
      timeout: { type: "string" },
      memory: { type: "string" },
      cpus: { type: "string" },
      verbose: { type: "boolean", default: false },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    Deno.exit(0);
  }
  return {
    files: positionals.length ? positionals.map(absoluteTestFile) : discoverKernelTests(),
    typeCheck: !values["no-check"],
    filter: values.filter,
    timeoutMs: positiveInt("timeout", values.timeout, 900) * 1000,
    memoryMiB: positiveInt("memory", values.memory, 3072),
    cpus: positiveInt("cpus", values.cpus, 2),
    verbose: values.verbose,
  };
}

function absoluteTestFile(path: string): string {
  // `deno task` runs in the repo root; INIT_CWD is where the user typed the command.
  const cwd = Deno.env.get("INIT_CWD") ?? Deno.cwd();
  const abs = resolve(cwd, path);
  let isFile = false;
  try {
    isFile = Deno.statSync(abs).isFile;
  } catch {
    // reported below
  }
  if (!isFile) throw new Error(`test file ${path} does not exist`);
  // The VM sees the host's root (/tmp included), but with fresh /run, /dev, /proc and /sys.
  if (/^\/(run|var\/run|dev|proc|sys)\//.test(abs)) {
    throw new Error(`test file ${abs} is under a directory the VM does not share; move it`);
  }
  return abs;
}

function discoverKernelTests(): string[] {
  const files = [...Deno.readDirSync(KERNEL_TEST_DIR)]
    .filter((e) => e.isFile && e.name.endsWith(".kernel.ts"))
    .map((e) => `${KERNEL_TEST_DIR}/${e.name}`)
    .sort();
  if (!files.length) throw new Error(`no tests/kernel/*.kernel.ts files in ${KERNEL_TEST_DIR}`);
  return files;
}

function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

async function denoDir(): Promise<string> {
  const fromEnv = Deno.env.get("DENO_DIR");
  if (fromEnv) return fromEnv;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json"],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  return JSON.parse(new TextDecoder().decode(out.stdout)).denoDir;
}

/** Type-checks (or only caches) the files on the host, so the VM needs no network and no check. */
async function prepareOnHost(opts: LaneOptions): Promise<void> {
  const sub = opts.typeCheck ? "check" : "cache";
  const status = await new Deno.Command(Deno.execPath(), {
    args: [sub, ...opts.files],
    cwd: REPO,
    stdout: "inherit",
    stderr: "inherit",
  }).spawn().status;
  if (!status.success) {
    throw new Error(
      `deno ${sub} of the kernel test files failed (see above); the VM was not booted`,
    );
  }
  // Tests may start the product itself (`deno run main.ts`, e.g. as a CNI plugin under
  // cnitool); the VM has no network, so its dependencies must be cached too.
  const main = await new Deno.Command(Deno.execPath(), {
    args: ["cache", "--quiet", `${REPO}/main.ts`],
    cwd: REPO,
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!main.success) {
    console.error(
      "kernel lane: warning: 'deno cache main.ts' failed; tests that run main.ts in the VM " +
        `may fail:\n${new TextDecoder().decode(main.stderr).trim()}`,
    );
  }
}

/** The script the VM runs inside the host's root: one `deno test` process over every file. */
function jobScript(opts: LaneOptions, cacheDir: string): string {
  const env: Record<string, string> = {
    PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    HOME: "/root",
    DENO_DIR: cacheDir,
    DENO_NO_UPDATE_CHECK: "1",
    DENO_NO_PROMPT: "1",
  };
  if (!Deno.stdout.isTerminal() || Deno.env.get("NO_COLOR")) env.NO_COLOR = "1";
  for (const [k, v] of Object.entries(Deno.env.toObject())) {
    if (k.startsWith("VPCNI_")) env[k] = v;
  }
  const args = ["test", "--allow-all", "--no-check", "--cached-only"];
  if (opts.filter !== undefined) args.push(`--filter=${opts.filter}`);
  args.push(...opts.files);
  return [
    "#!/bin/sh",
    "# Written by tests/kernel/lane.ts; run by the lane VM's init inside the host root.",
    ...Object.entries(env).map(([k, v]) => `export ${k}=${shellQuote(v)}`),
    `cd ${shellQuote(REPO)} || exit 126`,
    `exec ${[Deno.execPath(), ...args].map(shellQuote).join(" ")}`,
    "",
  ].join("\n");
}

// deno test's last line, e.g. "ok | 3 passed | 0 failed (5s)" or "FAILED | 2 passed | 1 failed".
const SUMMARY = /^(ok|FAILED) \| \d+ passed/;
// deno-lint-ignore no-control-regex
const ANSI = /\x1b\[[0-9;]*m/g;

function seconds(ms: number | undefined): string {
  return ms === undefined ? "?" : `${(ms / 1000).toFixed(1)} s`;
}

async function main(): Promise<number> {
  const opts = parseOptions(Deno.args);
  const host = findLaneHost();
  const t0 = performance.now();
  await prepareOnHost(opts);
  const prepMs = performance.now() - t0;

  await Deno.mkdir(LANE_DIR, { recursive: true });
  const initramfs = `${LANE_DIR}/initramfs-${host.kernelRelease}.cpio`;
  await writeInitramfs(initramfs, {
    busybox: host.busybox,
    modulesDir: host.modulesDir,
    kernelRelease: host.kernelRelease,
  });
  const job = `${LANE_DIR}/job-${Deno.pid}.sh`;
  await Deno.writeTextFile(job, jobScript(opts, await denoDir()), { mode: 0o755 });

  const rel = opts.files.map((f) => f.startsWith(REPO + "/") ? f.slice(REPO.length + 1) : f);
  console.log(
    `kernel lane: booting ${host.kernelRelease} (qemu tcg, ${opts.cpus} cpus, ` +
      `${opts.memoryMiB} MiB) to run ${rel.join(" ")}`,
  );
  let summary: string | undefined;
  const result = await (async () => {
    try {
      return await runVm({
        qemu: host.qemu,
        kernelImage: host.kernelImage,
        initramfs,
        jobScript: job,
        memoryMiB: opts.memoryMiB,
        cpus: opts.cpus,
        timeoutMs: opts.timeoutMs,
        kernelLog: opts.verbose,
        onBootLine: opts.verbose ? (l) => console.log(`[boot] ${l}`) : undefined,
        onJobLine: (line) => {
          console.log(line);
          const plain = line.replace(ANSI, "");
          if (SUMMARY.test(plain)) summary = plain;
        },
      });
    } finally {
      await Deno.remove(job).catch(() => {});
    }
  })();

  const showBootLog = () => {
    if (opts.verbose) return;
    console.error("--- VM console before the tests started ---");
    for (const l of result.bootLog) console.error(l);
    console.error("---");
  };
  const timing = `host check ${seconds(prepMs)}, boot ${seconds(result.bootMs)}, ` +
    `first test output at ${seconds(result.firstOutputMs)}, VM total ${seconds(result.totalMs)}`;
  if (result.timedOut) {
    if (result.bootMs === undefined) showBootLog();
    console.error(
      `kernel lane: FAILED: the VM did not finish within ${opts.timeoutMs / 1000} s ` +
        `and was killed (${
          result.bootMs === undefined ? "it never finished booting" : "the tests hung"
        }); ${timing}`,
    );
    return 124;
  }
  if (result.exitCode === undefined || result.initError) {
    showBootLog();
    console.error(
      `kernel lane: FAILED: ${
        result.initError ?? "the VM stopped without reporting an exit code"
      }; ${timing}`,
    );
    return result.exitCode ?? 125;
  }
  console.log(`kernel lane: deno test exited ${result.exitCode}; ${timing}`);
  console.log(summary ?? "kernel lane: deno test printed no summary line (see the output above)");
  return summary ? result.exitCode : result.exitCode || 1;
}

if (import.meta.main) {
  try {
    Deno.exitCode = await main();
  } catch (e) {
    console.error(
      e instanceof LanePrerequisiteError ? e.message : `kernel lane: ${(e as Error).message}`,
    );
    Deno.exitCode = e instanceof LanePrerequisiteError ? 2 : 1;
  }
}
