/**
 * A private containerd (Debian's 1.6.x with runc) driven through `crictl`, for the runtime
 * tests. Everything it writes lives under one temp dir: config, root, state, its gRPC socket,
 * runc's state; pod netns are mounted under its state dir (`netns_mounts_under_state_dir`),
 * pod cgroups go under a cgroup parent named after the test. It never pulls: the sandbox
 * ("pause") image and the workload image are one busybox OCI archive built by
 * tools/runtime/oci_image.ts and imported with `ctr images import`.
 *
 * containerd is forked while the calling thread sits in the node netns, so it lives there,
 * as on a real node, and so does every CNI plugin it execs. The machine's /etc/containerd and
 * any system containerd are never touched.
 *
 * What 1.6 does not let us move: shim sockets go to /run/containerd/s/ (named by a hash of
 * our socket path, removed when the shim exits) and libcni keeps its result cache in
 * /var/lib/cni/results (removed on DEL).
 *
 * @module
 */
import { inNetns } from "../../netlink/netns.ts";
import { buildOciImage, type OciImage } from "../../tools/runtime/oci_image.ts";
import { cgroupHierarchies } from "./cgroup_mounts.ts";
import { containerdConfig } from "./containerd_config.ts";
import { pathExists } from "../../base/path_exists.ts";
import { processArgvs } from "../../base/processes.ts";
import { PEERS_BIN } from "./peers.ts";
import { stopChild } from "./stop_child.ts";

/** containerd 1.6 puts shim sockets under `<this>/s/` whatever its config says. */
const SHIM_SOCKET_DIR = "/run/containerd";

/** What the runtime test needs on the machine, and how each is installed. */
const NEEDS: { bin: string; where: string[]; fix: string }[] = [
  {
    bin: "containerd",
    where: ["/usr/bin", "/usr/sbin", "/usr/local/bin"],
    fix: "apt-get install containerd",
  },
  { bin: "ctr", where: ["/usr/bin", "/usr/local/bin"], fix: "apt-get install containerd" },
  {
    bin: "containerd-shim-runc-v2",
    where: ["/usr/bin", "/usr/local/bin"],
    fix: "apt-get install containerd",
  },
  { bin: "runc", where: ["/usr/sbin", "/usr/bin", "/usr/local/sbin"], fix: "apt-get install runc" },
  { bin: "busybox", where: ["/bin", "/usr/bin"], fix: "apt-get install busybox-static" },
  {
    bin: "crictl",
    where: [PEERS_BIN],
    fix: "GOBIN=.peers/bin go install sigs.k8s.io/cri-tools/cmd/crictl@v1.34.0",
  },
  {
    bin: "loopback",
    where: [PEERS_BIN],
    fix: "GOBIN=.peers/bin go install " +
      "github.com/containernetworking/plugins/plugins/main/loopback@v1.10.0 " +
      "(containerd 1.6 runs it for every pod's lo)",
  },
];

/**
 * Finds every binary the runtime test needs; throws one error listing each missing one with
 * its install line (`bash tools/dev setup` installs them all).
 */
export function runtimeBinaries(): Record<string, string> {
  const found: Record<string, string> = {};
  const missing: string[] = [];
  for (const n of NEEDS) {
    const path = n.where.map((d) => `${d}/${n.bin}`).find((p) => {
      try {
        return Deno.statSync(p).isFile;
      } catch {
        return false;
      }
    });
    if (path) found[n.bin] = path;
    else missing.push(`  ${n.bin}: ${n.fix}`);
  }
  if (missing.length > 0) {
    throw new Error(
      `the container-runtime test needs binaries that are missing (run 'bash tools/dev setup'):\n${
        missing.join("\n")
      }`,
    );
  }
  return found;
}

/** The result of one crictl or ctr run. */
export interface ToolResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** A running private containerd. */
export class Containerd {
  /** Temp dir holding config, root, state and socket. */
  readonly dir: string;
  readonly socket: string;
  readonly log: string;
  /** The cgroup parent (cgroupfs) pods are put under; see {@linkcode Containerd.podConfig}. */
  readonly cgroupParent: string;
  /** Where containerd mounts the pod netns it creates. */
  readonly netnsDir: string;
  readonly image: OciImage;
  readonly bins: Record<string, string>;
  #nodePath: string;
  #proc: Deno.ChildProcess;
  #shimDirExisted: boolean;

  private constructor(
    init: {
      dir: string;
      nodePath: string;
      proc: Deno.ChildProcess;
      image: OciImage;
      bins: Record<string, string>;
      cgroupParent: string;
      shimDirExisted: boolean;
    },
  ) {
    this.dir = init.dir;
    this.socket = `${init.dir}/containerd.sock`;
    this.log = `${init.dir}/containerd.log`;
    this.netnsDir = `${init.dir}/state/io.containerd.grpc.v1.cri/netns`;
    this.#nodePath = init.nodePath;
    this.#proc = init.proc;
    this.image = init.image;
    this.bins = init.bins;
    this.cgroupParent = init.cgroupParent;
    this.#shimDirExisted = init.shimDirExisted;
  }

  /**
   * Builds the image, writes the config, starts containerd inside `nodePath`, waits for its
   * CRI to answer and imports the image. `cni` names the dirs `vpcni install` wrote to.
   */
  static async start(o: {
    nodePath: string;
    cniBinDir: string;
    cniConfDir: string;
    tag: string;
  }): Promise<Containerd> {
    const bins = runtimeBinaries();
    // containerd 1.6 always sets up the pod's lo with the reference loopback plugin first.
    await Deno.copyFile(bins.loopback, `${o.cniBinDir}/loopback`);
    const shimDirExisted = pathExists(SHIM_SOCKET_DIR);
    const dir = await Deno.makeTempDir({ prefix: `${o.tag}-containerd-` });
    let proc: Deno.ChildProcess | undefined;
    try {
      const image = await buildOciImage(`${dir}/busybox.oci.tar`, {
        name: "docker.io/vpcni/busybox:runtime-test",
        busybox: bins.busybox,
      });
      await Deno.writeTextFile(
        `${dir}/config.toml`,
        containerdConfig({
          root: `${dir}/root`,
          state: `${dir}/state`,
          grpcAddress: `${dir}/containerd.sock`,
          ttrpcAddress: `${dir}/containerd.sock.ttrpc`,
          logLevel: "info",
          sandboxImage: image.name,
          runc: bins.runc,
          runcRoot: `${dir}/runc`,
          cniBinDir: o.cniBinDir,
          cniConfDir: o.cniConfDir,
          private: true,
        }),
      );
      await Deno.writeTextFile(
        `${dir}/crictl.yaml`,
        `runtime-endpoint: unix://${dir}/containerd.sock\n` +
          `image-endpoint: unix://${dir}/containerd.sock\ntimeout: 60\n`,
      );
      const log = await Deno.open(`${dir}/containerd.log`, { create: true, write: true });
      proc = inNetns(o.nodePath, () =>
        new Deno.Command(bins.containerd, {
          args: ["--config", `${dir}/config.toml`],
          stdin: "null",
          stdout: "null",
          stderr: "piped",
        }).spawn());
      proc.stderr.pipeTo(log.writable).catch(() => {});
      const c = new Containerd({
        dir,
        nodePath: o.nodePath,
        proc,
        image,
        bins,
        cgroupParent: `/${o.tag}`,
        shimDirExisted,
      });
      await c.#waitServing(30_000);
      const imp = await c.ctr(["images", "import", image.path]);
      if (imp.code !== 0) throw new Error(`ctr images import failed: ${imp.stderr}${imp.stdout}`);
      return c;
    } catch (e) {
      if (proc) await stopChild(proc);
      const log = await Deno.readTextFile(`${dir}/containerd.log`).catch(() => "");
      await Deno.remove(dir, { recursive: true }).catch(() => {});
      throw new Error(`${(e as Error).message}\ncontainerd log:\n${log.slice(-2000)}`);
    }
  }

  async #waitServing(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last: ToolResult | undefined;
    while (Date.now() < deadline) {
      last = await this.crictl(["version"]);
      if (last.code === 0) return;
      const exited = await Promise.race([
        this.#proc.status.then((s) => s),
        new Promise<undefined>((res) => setTimeout(() => res(undefined), 200)),
      ]);
      if (exited) throw new Error(`containerd exited with code ${exited.code}`);
    }
    throw new Error(`containerd's CRI did not answer within ${timeoutMs} ms: ${last?.stderr}`);
  }

  /** Runs crictl against this containerd, from inside the node netns (as kubelet would). */
  crictl(args: string[]): Promise<ToolResult> {
    return this.#tool(this.bins.crictl, ["--config", `${this.dir}/crictl.yaml`, ...args]);
  }

  /** Runs ctr in containerd's `k8s.io` namespace (the one the CRI plugin uses). */
  ctr(args: string[]): Promise<ToolResult> {
    return this.#tool(this.bins.ctr, ["--address", this.socket, "--namespace", "k8s.io", ...args]);
  }

  /** Runs crictl and throws with its stderr (and the tail of containerd's log) on failure. */
  async crictlOk(args: string[]): Promise<string> {
    const r = await this.crictl(args);
    if (r.code !== 0) {
      const log = await Deno.readTextFile(this.log).catch(() => "");
      const errors = log.split("\n").filter((l) => /level=(error|fatal)/.test(l)).slice(-8);
      throw new Error(
        `crictl ${args.join(" ")} exited ${r.code}: ${r.stderr.trim()}\n` +
          `containerd errors:\n${errors.join("\n")}`,
      );
    }
    return r.stdout;
  }

  async #tool(bin: string, args: string[]): Promise<ToolResult> {
    const child = inNetns(
      this.#nodePath,
      () =>
        new Deno.Command(bin, { args, stdin: "null", stdout: "piped", stderr: "piped" }).spawn(),
    );
    const out = await child.output();
    const dec = new TextDecoder();
    return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  }

  /** Writes a pod sandbox config for `crictl runp` and returns its path. */
  async podConfig(
    name: string,
    annotations: Record<string, string>,
  ): Promise<string> {
    const path = `${this.dir}/pod-${name}.json`;
    await Deno.writeTextFile(
      path,
      JSON.stringify({
        metadata: { name, namespace: "vrt", uid: `uid-${name}`, attempt: 0 },
        hostname: name,
        log_directory: `${this.dir}/pod-logs/${name}`,
        annotations,
        linux: { cgroup_parent: this.cgroupParent },
      }),
    );
    return path;
  }

  /** Writes a workload container config (the busybox image, sleeping) and returns its path. */
  async containerConfig(name: string): Promise<string> {
    const path = `${this.dir}/ctr-${name}.json`;
    await Deno.writeTextFile(
      path,
      JSON.stringify({
        metadata: { name },
        image: { image: this.image.name },
        command: ["/bin/sleep", "2147483647"],
        log_path: `${name}.log`,
        linux: {},
      }),
    );
    return path;
  }

  /** Pod netns that containerd still has mounted. */
  async podNetnsLeft(): Promise<string[]> {
    const names: string[] = [];
    try {
      for await (const e of Deno.readDir(this.netnsDir)) names.push(e.name);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
    return names;
  }

  /**
   * Removes every pod (force), stops containerd, kills any shim of ours still alive, unmounts
   * anything left under our dirs, removes the cgroup parent and the temp dir. Never throws.
   */
  async close(): Promise<string[]> {
    const problems: string[] = [];
    const pods = await this.crictl(["pods", "-q"]).catch(() => undefined);
    for (const id of pods?.stdout.split("\n").filter((l) => l.trim() !== "") ?? []) {
      const r = await this.crictl(["rmp", "--force", id]).catch(() => undefined);
      if (r?.code !== 0) problems.push(`crictl rmp -f ${id}: ${r?.stderr.trim()}`);
    }
    await stopChild(this.#proc);
    // A shim outlives containerd by design; ours are those started with our socket address.
    for (const pid of await shimsOf(this.socket)) {
      problems.push(`shim ${pid} was still running`);
      try {
        Deno.kill(pid, "SIGKILL");
      } catch { /* gone meanwhile */ }
    }
    for (const m of await mountsUnder(this.dir)) {
      const r = await new Deno.Command("umount", { args: ["-l", m], stderr: "null" }).output();
      if (!r.success) problems.push(`could not unmount ${m}`);
    }
    for (const hierarchy of await cgroupHierarchies()) {
      try {
        Deno.removeSync(`${hierarchy}${this.cgroupParent}`);
      } catch (e) {
        if (!(e instanceof Deno.errors.NotFound)) {
          problems.push(`cgroup ${hierarchy}${this.cgroupParent}: ${(e as Error).message}`);
        }
      }
    }
    await Deno.remove(this.dir, { recursive: true }).catch((e) =>
      problems.push(`rm ${this.dir}: ${(e as Error).message}`)
    );
    if (!this.#shimDirExisted) {
      // Made by our containerd; removed only while empty (a shim of anyone else keeps it).
      for (const d of [`${SHIM_SOCKET_DIR}/s`, SHIM_SOCKET_DIR]) {
        try {
          Deno.removeSync(d);
        } catch { /* not empty, or gone */ }
      }
    }
    return problems;
  }
}

/** PIDs of containerd-shim-runc-v2 processes started for the containerd at `socket`. */
export async function shimsOf(socket: string): Promise<number[]> {
  const pids: number[] = [];
  for await (const { pid, argv } of processArgvs()) {
    if (!argv[0]?.endsWith("containerd-shim-runc-v2")) continue;
    const i = argv.indexOf("-address");
    if (i >= 0 && argv[i + 1] === socket) pids.push(pid);
  }
  return pids;
}

/** Mount points (deepest first) under `dir`, from this process's mountinfo. */
export async function mountsUnder(dir: string): Promise<string[]> {
  const info = await Deno.readTextFile("/proc/self/mountinfo");
  return info.split("\n").map((l) => l.split(" ")[4]).filter((m) =>
    m !== undefined && (m === dir || m.startsWith(`${dir}/`))
  ).sort((a, b) => b.length - a.length);
}
