/**
 * The node's own view of the file system and its own host name: a mount namespace and a UTS
 * namespace (host name = the node's name, which hostNetwork pods report) that every node-side
 * process of the lane (etcd and the control plane on the first node, containerd and its
 * shims, kubelet, kube-proxy, the pods) runs in, together with the node's network namespace.
 * What they write to the usual node paths stays inside the lane:
 *
 * - `/run` is a fresh tmpfs (pod netns under /run/netns, containerd's shim sockets, /run/vpcni);
 * - `/etc`, `/opt`, `/var/lib` and `/var/log` are overlays whose upper layers live in the lane
 *   dir (/etc/cni/net.d, /opt/cni/bin, /var/lib/kubelet, /var/lib/vpcni, /var/log/pods);
 * - the global sysctl files kubelet writes (`vm.overcommit_memory`, `kernel.panic`, …) are
 *   shadowed by files of the lane, so the machine's values never change;
 * - every mount is made shared inside the namespace, so kubelet's volume mounts reach the
 *   containers and `mountPropagation: HostToContainer` works.
 *
 * A holder process keeps the namespace alive; when it and every process that entered it are
 * gone, the kernel removes every mount in it at once, so teardown cannot leave one behind on
 * the machine. Processes enter with `nsenter --net=… --mount=… --uts=…` (not `ip netns exec`,
 * which would make yet another mount namespace).
 *
 * @module
 */
import { runTool } from "../../aws/sim/tool.ts";
import { stopChild } from "./stop_child.ts";

/** Overlaid directories: the machine's content below, the lane's writes above. */
const OVERLAYS = ["/etc", "/opt", "/var/lib", "/var/log"];

/** Global (not per-netns) sysctls kubelet sets at start. */
const SHADOWED_SYSCTLS = [
  "vm/overcommit_memory",
  "vm/panic_on_oom",
  "kernel/panic",
  "kernel/panic_on_oops",
  "kernel/keys/root_maxkeys",
  "kernel/keys/root_maxbytes",
];

/** A process started inside the node. */
export interface NodeProcess {
  name: string;
  proc: Deno.ChildProcess;
  log: string;
}

/** The node's namespaces and the processes started in them. */
export class NodeNamespace {
  /** Lane dir holding the overlay layers and the logs. */
  readonly dir: string;
  /** The node's network namespace (a path under /run/netns). */
  readonly netnsPath: string;
  readonly #holder: Deno.ChildProcess;
  readonly #nsenter: string;
  readonly #procs: NodeProcess[] = [];
  /** `mnt:[inode]` of the namespace, to find every process inside it. */
  readonly mountNsId: string;

  private constructor(
    dir: string,
    netnsPath: string,
    holder: Deno.ChildProcess,
    nsenter: string,
    id: string,
  ) {
    this.dir = dir;
    this.netnsPath = netnsPath;
    this.#holder = holder;
    this.#nsenter = nsenter;
    this.mountNsId = id;
  }

  /** Creates the namespaces; `dir` is an empty lane dir, `hostname` the node's name. */
  static async create(
    o: { dir: string; netnsPath: string; hostname: string; unshare: string; nsenter: string },
  ): Promise<NodeNamespace> {
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(o.hostname)) {
      throw new Error(`${JSON.stringify(o.hostname)} is not a valid node host name`);
    }
    const lines = [
      "set -eu",
      `echo ${o.hostname} > /proc/sys/kernel/hostname`,
      "mount -t tmpfs -o mode=0755 lane-run /run",
    ];
    for (const d of OVERLAYS) {
      const base = `${o.dir}/overlay${d.replaceAll("/", "_")}`;
      await Deno.mkdir(`${base}/upper`, { recursive: true });
      await Deno.mkdir(`${base}/work`, { recursive: true });
      lines.push(
        `mount -t overlay lane-overlay -o lowerdir=${d},upperdir=${base}/upper,workdir=${base}/work ${d}`,
      );
    }
    await Deno.mkdir(`${o.dir}/sysctl`, { recursive: true });
    for (const s of SHADOWED_SYSCTLS) {
      const f = `${o.dir}/sysctl/${s.replaceAll("/", ".")}`;
      await Deno.writeTextFile(f, await Deno.readTextFile(`/proc/sys/${s}`));
      lines.push(`mount --bind ${f} /proc/sys/${s}`);
    }
    lines.push("mount --make-rshared /", "echo ready", "exec sleep 2147483647");
    const holder = new Deno.Command(o.unshare, {
      args: ["--mount", "--uts", "--propagation", "private", "--", "sh", "-c", lines.join("\n")],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const reader = holder.stdout.getReader();
    const first = await reader.read();
    reader.releaseLock();
    holder.stdout.cancel().catch(() => {});
    const ready = new TextDecoder().decode(first.value ?? new Uint8Array()).trim() === "ready";
    if (!ready) {
      const err = await new Response(holder.stderr).text().catch(() => "");
      await holder.status;
      throw new Error(`the node's mount namespace could not be set up: ${err.trim()}`);
    }
    holder.stderr.cancel().catch(() => {});
    const id = await Deno.readLink(`/proc/${holder.pid}/ns/mnt`);
    return new NodeNamespace(o.dir, o.netnsPath, holder, o.nsenter, id);
  }

  /** argv that runs `cmd` inside the node (network, mount and UTS namespace). */
  wrap(cmd: string[]): string[] {
    return [
      this.#nsenter,
      `--net=${this.netnsPath}`,
      `--mount=/proc/${this.#holder.pid}/ns/mnt`,
      `--uts=/proc/${this.#holder.pid}/ns/uts`,
      "--",
      ...cmd,
    ];
  }

  /** Starts a long-running process inside the node; its output goes to `<dir>/<name>.log`. */
  async start(name: string, cmd: string[], env: Record<string, string> = {}): Promise<NodeProcess> {
    const log = `${this.dir}/${name}.log`;
    const file = await Deno.open(log, { create: true, append: true });
    const argv = this.wrap(cmd);
    const proc = new Deno.Command(argv[0], {
      args: argv.slice(1),
      env,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    // Both streams append to one file; each chunk is written as it arrives.
    const copy = async (stream: ReadableStream<Uint8Array>) => {
      for await (const chunk of stream) await file.write(chunk);
    };
    Promise.all([copy(proc.stdout), copy(proc.stderr)]).catch(() => {}).finally(() => {
      try {
        file.close();
      } catch { /* closed */ }
    });
    const p = { name, proc, log };
    this.#procs.push(p);
    return p;
  }

  /** Runs a command inside the node to completion. */
  async run(
    cmd: string[],
    stdin?: string,
  ): Promise<{ code: number; stdout: string; stderr: string }> {
    return await runTool(this.wrap(cmd), stdin);
  }

  /** Stops one started process (SIGTERM, then SIGKILL after `graceMs`). */
  async stop(name: string, graceMs = 10_000): Promise<void> {
    const p = this.#procs.find((x) => x.name === name);
    if (!p) return;
    await stopChild(p.proc, graceMs);
    this.#procs.splice(this.#procs.indexOf(p), 1);
  }

  /** True while the named process runs. */
  async running(name: string): Promise<boolean> {
    const p = this.#procs.find((x) => x.name === name);
    if (!p) return false;
    return await Promise.race([
      p.proc.status.then(() => false),
      new Promise<boolean>((r) => setTimeout(() => r(true), 0)),
    ]);
  }

  /** PIDs of every process inside the node's mount namespace except the holder. */
  async pidsInside(): Promise<number[]> {
    const pids: number[] = [];
    for await (const e of Deno.readDir("/proc")) {
      if (!/^\d+$/.test(e.name) || Number(e.name) === this.#holder.pid) continue;
      try {
        if ((await Deno.readLink(`/proc/${e.name}/ns/mnt`)) === this.mountNsId) {
          pids.push(Number(e.name));
        }
      } catch { /* exited meanwhile */ }
    }
    return pids;
  }

  /**
   * Stops the started processes in reverse order, kills whatever else still runs inside
   * (shims, containers), then the holder, which takes every mount of the node with it.
   */
  async close(): Promise<void> {
    for (const p of [...this.#procs].reverse()) await stopChild(p.proc, 10_000);
    this.#procs.length = 0;
    for (let round = 0; round < 20; round++) {
      const left = await this.pidsInside();
      if (left.length === 0) break;
      for (const pid of left) {
        try {
          Deno.kill(pid, round < 2 ? "SIGTERM" : "SIGKILL");
        } catch { /* gone */ }
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    await stopChild(this.#holder, 1_000);
  }
}
