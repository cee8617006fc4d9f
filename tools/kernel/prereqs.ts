/**
 * Finds what the kernel lane needs on the host (qemu, Debian's kernel and its modules, a static
 * busybox) and says exactly what to install when something is missing.
 *
 * @module
 */

/** The apt command that installs everything the lane needs on a Debian host. */
export const INSTALL_HINT = "apt-get install qemu-system-x86 busybox-static linux-image-amd64";

/** Host paths the lane boots with. */
export interface LaneHost {
  qemu: string;
  /** Kernel release, e.g. `6.1.0-57-amd64`. */
  kernelRelease: string;
  kernelImage: string;
  modulesDir: string;
  busybox: string;
}

/** Why the lane cannot run, with what to do about it. */
export class LanePrerequisiteError extends Error {
  /** Each missing piece, one sentence each. */
  readonly problems: string[];
  constructor(problems: string[]) {
    super(
      `the kernel lane cannot run:\n  - ${problems.join("\n  - ")}\n` +
        `install what is missing (as root): ${INSTALL_HINT}`,
    );
    this.name = "LanePrerequisiteError";
    this.problems = problems;
  }
}

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

function canRead(path: string): boolean {
  try {
    Deno.openSync(path, { read: true }).close();
    return true;
  } catch {
    return false;
  }
}

/** Finds an executable on PATH, like `which`. */
export function which(name: string, path = Deno.env.get("PATH") ?? ""): string | undefined {
  for (const dir of path.split(":").filter((d) => d !== "")) {
    const candidate = `${dir}/${name}`;
    try {
      const st = Deno.statSync(candidate);
      if (st.isFile && ((st.mode ?? 0o111) & 0o111) !== 0) return candidate;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

/**
 * True when the ELF file at `path` has no program interpreter, i.e. it is statically linked
 * and can run in an initramfs that holds nothing else.
 */
export function isStaticElf(path: string): boolean {
  const file = Deno.openSync(path, { read: true });
  const bytes = new Uint8Array(64 * 1024); // ELF and program headers sit at the start
  let length: number;
  try {
    length = file.readSync(bytes) ?? 0;
  } finally {
    file.close();
  }
  if (length < 64) return false;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const isElf64 = bytes[0] === 0x7f && bytes[1] === 0x45 && bytes[2] === 0x4c &&
    bytes[3] === 0x46 && bytes[4] === 2;
  if (!isElf64) return false;
  const phoff = Number(view.getBigUint64(0x20, true));
  const phentsize = view.getUint16(0x36, true);
  const phnum = view.getUint16(0x38, true);
  const PT_INTERP = 3;
  if (phoff + phnum * phentsize > length) return false;
  for (let i = 0; i < phnum; i++) {
    if (view.getUint32(phoff + i * phentsize, true) === PT_INTERP) return false;
  }
  return true;
}

/** Compares kernel releases like `6.1.0-57-amd64` by their numbers. */
function compareReleases(a: string, b: string): number {
  const na = a.match(/\d+/g)?.map(Number) ?? [];
  const nb = b.match(/\d+/g)?.map(Number) ?? [];
  for (let i = 0; i < Math.max(na.length, nb.length); i++) {
    const d = (na[i] ?? -1) - (nb[i] ?? -1);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * Picks the newest Debian `-amd64` kernel in /boot that has its modules installed, or the one
 * named by `release`.
 */
function findKernel(problems: string[], release?: string): Omit<LaneHost, "qemu" | "busybox"> {
  let releases: string[] = [];
  try {
    releases = [...Deno.readDirSync("/boot")]
      .map((e) => e.name.match(/^vmlinuz-(.+-amd64)$/)?.[1])
      .filter((r): r is string => r !== undefined)
      .sort(compareReleases);
  } catch {
    // no /boot: reported below
  }
  const chosen = release ?? releases.at(-1);
  if (!chosen) {
    problems.push("no Debian kernel image /boot/vmlinuz-*-amd64 (package linux-image-amd64)");
    return { kernelRelease: "", kernelImage: "", modulesDir: "" };
  }
  const kernelImage = `/boot/vmlinuz-${chosen}`;
  const modulesDir = `/lib/modules/${chosen}`;
  if (!isFile(kernelImage)) {
    problems.push(`kernel image ${kernelImage} does not exist (package linux-image-amd64)`);
  } else if (!canRead(kernelImage)) {
    problems.push(`kernel image ${kernelImage} is not readable: run the lane as root`);
  }
  if (!isFile(`${modulesDir}/modules.dep`)) {
    problems.push(
      `modules for ${chosen} are missing (${modulesDir}/modules.dep; package linux-image-amd64)`,
    );
  }
  return { kernelRelease: chosen, kernelImage, modulesDir };
}

function findBusybox(problems: string[]): string {
  const candidates = ["/usr/bin/busybox", "/bin/busybox", which("busybox")]
    .filter((p): p is string => p !== undefined && isFile(p));
  const staticOne = candidates.find((p) => isStaticElf(p));
  if (staticOne) return staticOne;
  problems.push(
    candidates.length
      ? `busybox at ${candidates[0]} is dynamically linked; the initramfs needs busybox-static`
      : "busybox is not installed (package busybox-static)",
  );
  return "";
}

/**
 * Checks every prerequisite and returns the host paths, or throws one
 * {@linkcode LanePrerequisiteError} listing everything that is missing.
 * `VPCNI_LANE_KERNEL` (a release such as `6.1.0-57-amd64`) picks a kernel.
 */
export function findLaneHost(): LaneHost {
  const problems: string[] = [];
  const qemu = which("qemu-system-x86_64") ?? "";
  if (!qemu) problems.push("qemu-system-x86_64 is not on PATH (package qemu-system-x86)");
  const kernel = findKernel(problems, Deno.env.get("VPCNI_LANE_KERNEL") || undefined);
  const busybox = findBusybox(problems);
  if (problems.length) throw new LanePrerequisiteError(problems);
  return { qemu, busybox, ...kernel };
}
