/**
 * Builds the kernel lane's initramfs: a static busybox, the modules the lane needs (in load
 * order, decompressed on the host), and tools/kernel/init.sh as /init.
 *
 * @module
 */
import { type CpioEntry, writeCpio } from "./cpio.ts";
import { LANE_MODULES, loadOrder, parseModulesBuiltin, parseModulesDep } from "./modules.ts";

/** What goes into the initramfs. */
export interface InitramfsInputs {
  busybox: string;
  modulesDir: string;
  kernelRelease: string;
  /** Modules to load (dependencies are added); defaults to {@linkcode LANE_MODULES}. */
  modules?: readonly string[];
}

/** The archive and the module files it loads, in order. */
export interface BuiltInitramfs {
  cpio: Uint8Array;
  moduleOrder: string[];
}

const INIT_SCRIPT = new URL("./init.sh", import.meta.url);

async function decompress(path: string, busybox: string): Promise<Uint8Array> {
  if (path.endsWith(".ko")) return await Deno.readFile(path);
  // Compressed modules (.ko.xz on some Debian releases, .ko.zst on newer ones): busybox
  // insmod cannot read them, so they are unpacked here.
  const cmd = path.endsWith(".xz")
    ? [busybox, "xzcat", path]
    : path.endsWith(".gz")
    ? [busybox, "zcat", path]
    : path.endsWith(".zst")
    ? ["zstd", "-dc", path]
    : undefined;
  if (!cmd) throw new Error(`kernel module ${path}: unknown compression`);
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(cmd[0], { args: cmd.slice(1), stdout: "piped", stderr: "piped" })
      .output();
  } catch (e) {
    throw new Error(
      `cannot decompress ${path} with ${cmd[0]}: ${(e as Error).message}` +
        (cmd[0] === "zstd" ? " (apt-get install zstd)" : ""),
    );
  }
  if (!out.success) {
    throw new Error(`decompressing ${path} failed: ${new TextDecoder().decode(out.stderr)}`);
  }
  return out.stdout;
}

function baseName(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1).replace(/\.(xz|gz|zst)$/, "");
}

/** Builds the initramfs in memory. */
export async function buildInitramfs(inputs: InitramfsInputs): Promise<BuiltInitramfs> {
  const dir = inputs.modulesDir;
  const deps = parseModulesDep(await Deno.readTextFile(`${dir}/modules.dep`));
  let builtinText = "";
  try {
    builtinText = await Deno.readTextFile(`${dir}/modules.builtin`);
  } catch {
    // Older packages may lack it; then every module must be a file.
  }
  const order = loadOrder(
    inputs.modules ?? LANE_MODULES,
    deps,
    parseModulesBuiltin(builtinText),
    inputs.kernelRelease,
  );

  const entries: CpioEntry[] = [
    { kind: "dir", path: "bin" },
    { kind: "file", path: "bin/busybox", data: await Deno.readFile(inputs.busybox), mode: 0o755 },
    { kind: "symlink", path: "bin/sh", target: "busybox" },
    { kind: "dir", path: "dev" },
    // The kernel opens /dev/console for init's stdio before anything is mounted.
    { kind: "chardev", path: "dev/console", major: 5, minor: 1 },
    { kind: "dir", path: "modules" },
  ];
  const names: string[] = [];
  for (const rel of order) {
    const name = baseName(rel);
    names.push(name);
    entries.push({
      kind: "file",
      path: `modules/${name}`,
      data: await decompress(`${dir}/${rel}`, inputs.busybox),
    });
  }
  const encoder = new TextEncoder();
  entries.push(
    { kind: "file", path: "modules.order", data: encoder.encode(names.join("\n") + "\n") },
    { kind: "file", path: "init", data: await Deno.readFile(INIT_SCRIPT), mode: 0o755 },
  );
  return { cpio: writeCpio(entries), moduleOrder: names };
}

/**
 * Builds the initramfs into `path`, written to a temporary name and renamed so that a lane
 * running at the same time never boots a half-written file.
 */
export async function writeInitramfs(path: string, inputs: InitramfsInputs): Promise<string[]> {
  const built = await buildInitramfs(inputs);
  const tmp = `${path}.${Deno.pid}.tmp`;
  await Deno.writeFile(tmp, built.cpio);
  await Deno.rename(tmp, path);
  return built.moduleOrder;
}
