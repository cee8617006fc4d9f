/**
 * A containerd for `ctr` alone (Debian's 1.6.x with runc), to import and run images the way
 * a node's runtime does. Everything it writes lives under one temp dir.
 *
 * @module
 */
import { run, sh } from "./sh.ts";

/**
 * Starts a private containerd 1.6 in `dir` without the CRI (only `ctr` talks to it). Its
 * containers' cgroups go under `/<tag>`, removed by `stop` (when empty), with every mount
 * left under `dir`.
 */
export async function startCtrContainerd(
  dir: string,
  tag: string,
): Promise<
  {
    ctrRun: (name: string, a: string[]) => Promise<string>;
    ctrRunRaw: (name: string, a: string[]) => Promise<{ code: number; stdout: string }>;
    stop: () => Promise<void>;
  }
> {
  await Deno.writeTextFile(
    `${dir}/config.toml`,
    `version = 2
root = "${dir}/root"
state = "${dir}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "${dir}/containerd.sock"
[ttrpc]
  address = "${dir}/containerd.sock.ttrpc"
[metrics]
  address = ""
`,
  );
  const log = await Deno.open(`${dir}/containerd.log`, { create: true, write: true });
  const proc = new Deno.Command("containerd", {
    args: ["--config", `${dir}/config.toml`],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  proc.stderr.pipeTo(log.writable).catch(() => {});
  const ctr = async (args: string[]) =>
    await sh(["ctr", "--address", `${dir}/containerd.sock`, "--namespace", "k8s.io", ...args]);
  /** `ctr run --rm` with the container's cgroup under /<tag>, removed by `stop`. */
  const ctrRun = async (name: string, args: string[]) =>
    await ctr(["run", "--rm", "--cgroup", `/${tag}/${name}`, ...args]);
  const ctrRunRaw = async (name: string, args: string[]) =>
    await run([
      "ctr",
      "--address",
      `${dir}/containerd.sock`,
      "--namespace",
      "k8s.io",
      "run",
      "--rm",
      "--cgroup",
      `/${tag}/${name}`,
      ...args,
    ]);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await run(["ctr", "--address", `${dir}/containerd.sock`, "version"]);
    if (r.code === 0) break;
    if (Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(
        `containerd did not answer: ${await Deno.readTextFile(`${dir}/containerd.log`)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const stop = async () => {
    proc.kill("SIGTERM");
    await proc.status;
    const mounts = (await Deno.readTextFile("/proc/self/mounts")).split("\n")
      .map((l) => l.split(" ")[1]).filter((m) => m?.startsWith(dir)).reverse();
    for (const m of mounts) await run(["umount", "-l", m]);
    for (const h of Deno.readDirSync("/sys/fs/cgroup")) {
      await Deno.remove(`/sys/fs/cgroup/${h.name}/${tag}`).catch(() => {}); // only when empty
    }
  };
  return { ctrRun, ctrRunRaw, stop };
}
