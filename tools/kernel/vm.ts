/**
 * Boots the lane's VM under qemu (TCG), streams its serial console, and reads the exit code
 * that tools/kernel/init.sh prints as its last line.
 *
 * @module
 */

/** How to boot the lane VM. */
export interface VmOptions {
  qemu: string;
  kernelImage: string;
  initramfs: string;
  /** Absolute path, as seen from inside the VM (the host root), of the job script to run. */
  jobScript: string;
  memoryMiB: number;
  cpus: number;
  timeoutMs: number;
  /** Print the kernel's warnings and errors after the job (a debugging aid). */
  kernelLog?: boolean;
  /** Called with each console line printed after the VM booted (the job's output). */
  onJobLine: (line: string) => void;
  /** Called with each console line printed while booting. */
  onBootLine?: (line: string) => void;
}

/** What happened to the VM. */
export interface VmResult {
  /** The job's exit code, or undefined when the VM ended without reporting one. */
  exitCode?: number;
  /** A problem init reported before the job could start (VPCNI-LANE-ERROR). */
  initError?: string;
  timedOut: boolean;
  /** Milliseconds from starting qemu to the job starting inside the VM. */
  bootMs?: number;
  /** Milliseconds from starting qemu to the job's first line of output (Deno has started). */
  firstOutputMs?: number;
  /** Milliseconds from starting qemu to it exiting. */
  totalMs: number;
  /** Every console line before the job started (kernel and init messages). */
  bootLog: string[];
}

/** Marker lines printed by tools/kernel/init.sh. */
export const MARKERS = {
  booted: "VPCNI-LANE-BOOTED",
  exit: "VPCNI-LANE-EXIT=",
  error: "VPCNI-LANE-ERROR:",
} as const;

/** The qemu command line for a lane boot. */
export function qemuArgs(opts: VmOptions): string[] {
  const append = [
    "console=ttyS0",
    "panic=-1", // a panic reboots, and -no-reboot turns that into qemu exiting
    // The whole boot is logged, for when it fails; init then quiets the console (dmesg -n)
    // so kernel messages do not interleave with the tests' output.
    "loglevel=6",
    "mitigations=off", // TCG: speculative-execution mitigations only cost time here
    `vpcni.job=${opts.jobScript}`,
    `vpcni.dmesg=${opts.kernelLog ? 1 : 0}`,
  ].join(" ");
  return [
    "-accel",
    "tcg",
    "-cpu",
    "max",
    "-m",
    String(opts.memoryMiB),
    "-smp",
    String(opts.cpus),
    "-nodefaults",
    "-no-reboot",
    "-display",
    "none",
    "-serial",
    "stdio",
    "-nic",
    "none",
    "-kernel",
    opts.kernelImage,
    "-initrd",
    opts.initramfs,
    "-append",
    append,
    "-virtfs",
    "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap",
    "-device",
    "virtio-rng-pci",
  ];
}

/** Boots the VM and waits for it to power off, or kills it at the timeout. */
export async function runVm(opts: VmOptions): Promise<VmResult> {
  const started = performance.now();
  const child = new Deno.Command(opts.qemu, {
    args: qemuArgs(opts),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();

  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }, opts.timeoutMs);

  const result: VmResult = { timedOut: false, totalMs: 0, bootLog: [] };
  let reportedEnd = false;
  const handleLine = (raw: string) => {
    // The console ends lines with CR LF, and a CR inside a line returns to its start (Deno
    // rewrites a test's line when it finishes): keep what a terminal would show.
    const trimmed = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    const line = trimmed.slice(trimmed.lastIndexOf("\r") + 1);
    if (reportedEnd) return; // after the exit marker: only the kernel's power-off chatter
    if (line.startsWith(MARKERS.exit)) {
      result.exitCode = Number(line.slice(MARKERS.exit.length).trim());
      reportedEnd = true;
      return;
    }
    if (line.startsWith(MARKERS.error)) {
      result.initError = line.slice(MARKERS.error.length).trim();
      result.bootLog.push(line);
      return;
    }
    if (result.bootMs === undefined) {
      if (line.startsWith(MARKERS.booted)) {
        result.bootMs = performance.now() - started;
        return;
      }
      result.bootLog.push(line);
      opts.onBootLine?.(line);
      return;
    }
    result.firstOutputMs ??= performance.now() - started;
    opts.onJobLine(line);
  };

  const stderrText = new Response(child.stderr).text();
  const decoder = new TextDecoder();
  let pending = "";
  for await (const chunk of child.stdout) {
    pending += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = pending.indexOf("\n")) >= 0) {
      handleLine(pending.slice(0, nl));
      pending = pending.slice(nl + 1);
    }
  }
  if (pending !== "") handleLine(pending);
  const status = await child.status;
  clearTimeout(timer);
  result.timedOut = timedOut;
  result.totalMs = performance.now() - started;
  const stderr = (await stderrText).trim();
  if (!status.success && !timedOut && stderr) result.bootLog.push(`qemu: ${stderr}`);
  return result;
}
