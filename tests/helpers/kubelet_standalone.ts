/**
 * A real kubelet (built into `.peers/k8s/<version>/bin` by `tools/dev`) running standalone:
 * no API server, static pods only, with a private containerd (runtime_containerd.ts). Its
 * device manager takes plugin registrations and its pod-resources socket answers
 * `GetAllocatableResources`, `List` and `Get`, which is what vpcni's device plugin uses.
 *
 * The kubelet runs in a network namespace of its own (its ports and node address stay
 * there) and a mount namespace of its own, where:
 * - a temp dir is mounted over `/var/lib`, so the device-plugin directory the kubelet
 *   hard-codes (`/var/lib/kubelet/device-plugins`) is `<dir>/var-lib/kubelet/device-plugins`
 *   as the host sees it, and two test runs never share one;
 * - the global sysctl files the kubelet writes (`vm.overcommit_memory`, `kernel.panic`,
 *   `kernel.panic_on_oops`) are shadowed by plain files.
 *
 * @module
 */
import { createNetns, deleteNetns, uniqueName } from "./netns.ts";
import { sh } from "./sh.ts";
import { stopChild } from "./stop_child.ts";
import { Containerd } from "./runtime_containerd.ts";
import { UnixGrpcClient } from "../../ipam/kubelet/grpc.ts";
import { POD_RESOURCES } from "../../ipam/kubelet/services.ts";

/** The Kubernetes release the kubelet is built from. */
export const KUBELET_VERSION = "v1.34.4";

/** The kubelet binary, or undefined when `tools/dev` has not built it here. */
export function kubeletBin(): string | undefined {
  const path = Deno.env.get("VPCNI_KUBELET") ??
    new URL(`../../.peers/k8s/${KUBELET_VERSION}/bin/kubelet`, import.meta.url).pathname;
  try {
    return Deno.statSync(path).isFile ? path : undefined;
  } catch {
    return undefined;
  }
}

const SHADOWED_SYSCTLS = ["vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"];
const NODE_IP = "10.254.0.2";

/** A standalone kubelet with its containerd, netns and files. */
export class StandaloneKubelet {
  /** The host's view of the kubelet's `/var/lib/kubelet/device-plugins`. */
  readonly devicePluginDir: string;
  /** The kubelet's pod-resources socket. */
  readonly podResourcesSocket: string;
  readonly manifests: string;
  readonly log: string;
  #proc?: Deno.ChildProcess;
  #client?: UnixGrpcClient;
  starts = 0;

  private constructor(
    readonly dir: string,
    /** The node's netns; `name` is set when this helper made it (and deletes it). */
    readonly netns: { path: string; name?: string },
    readonly nodeIp: string,
    readonly containerd: Containerd,
    /** Whether this helper started containerd (and stops it). */
    readonly ownsContainerd: boolean,
    readonly bin: string,
  ) {
    this.devicePluginDir = `${dir}/var-lib/kubelet/device-plugins`;
    this.podResourcesSocket = `${dir}/root/pod-resources/kubelet.sock`;
    this.manifests = `${dir}/manifests`;
    this.log = `${dir}/kubelet.log`;
  }

  /** The directories the kubelet's files go to under `dir`. */
  static async makeDirs(dir: string): Promise<void> {
    for (
      const d of [
        "var-lib/kubelet/device-plugins",
        "root",
        "manifests",
        "cni/bin",
        "cni/conf",
        "sysctl",
      ]
    ) {
      await Deno.mkdir(`${dir}/${d}`, { recursive: true });
    }
  }

  /**
   * Starts a kubelet on a node that already runs: its netns (`nodeIp` is an address there)
   * and containerd. Its files go under `dir` (which the caller removes).
   */
  static async startOn(o: {
    dir: string;
    netnsPath: string;
    nodeIp: string;
    containerd: Containerd;
  }): Promise<StandaloneKubelet> {
    const bin = kubeletBin();
    if (!bin) throw new Error(`no kubelet ${KUBELET_VERSION} built: run 'bash tools/dev setup'`);
    await StandaloneKubelet.makeDirs(o.dir);
    const k = new StandaloneKubelet(
      o.dir,
      { path: o.netnsPath },
      o.nodeIp,
      o.containerd,
      false,
      bin,
    );
    await k.#writeFiles();
    await k.startProcess();
    return k;
  }

  /** Makes the netns, starts containerd there, then the kubelet; waits until it serves. */
  static async start(tag: string): Promise<StandaloneKubelet> {
    const bin = kubeletBin();
    if (!bin) throw new Error(`no kubelet ${KUBELET_VERSION} built: run 'bash tools/dev setup'`);
    const dir = await Deno.makeTempDir({ prefix: `${tag}-kubelet-` });
    const netns = await createNetns(uniqueName(tag));
    let containerd: Containerd | undefined;
    try {
      // kubelet wants a node address that is not loopback: one end of a veth pair.
      await sh(["ip", "link", "add", "node0", "type", "veth", "peer", "name", "node1"], {
        netns: netns.name,
      });
      await sh(["ip", "addr", "add", `${NODE_IP}/24`, "dev", "node0"], { netns: netns.name });
      for (const l of ["node0", "node1"]) {
        await sh(["ip", "link", "set", l, "up"], { netns: netns.name });
      }
      await sh(["ip", "route", "add", "default", "via", "10.254.0.1", "dev", "node0"], {
        netns: netns.name,
      });
      await StandaloneKubelet.makeDirs(dir);
      containerd = await Containerd.start({
        nodePath: netns.path,
        cniBinDir: `${dir}/cni/bin`,
        cniConfDir: `${dir}/cni/conf`,
        tag,
      });
      const k = new StandaloneKubelet(dir, netns, NODE_IP, containerd, true, bin);
      await k.#writeFiles();
      await k.startProcess();
      return k;
    } catch (e) {
      await containerd?.close();
      await deleteNetns(netns.name);
      await Deno.remove(dir, { recursive: true }).catch(() => {});
      throw e;
    }
  }

  async #writeFiles(): Promise<void> {
    for (const s of SHADOWED_SYSCTLS) {
      const name = s.replace("/", "_");
      await Deno.writeTextFile(
        `${this.dir}/sysctl/${name}`,
        await Deno.readTextFile(`/proc/sys/${s}`),
      );
    }
    await Deno.writeTextFile(
      `${this.dir}/config.yaml`,
      JSON.stringify({
        apiVersion: "kubelet.config.k8s.io/v1beta1",
        kind: "KubeletConfiguration",
        authentication: { anonymous: { enabled: true }, webhook: { enabled: false } },
        authorization: { mode: "AlwaysAllow" },
        cgroupDriver: "cgroupfs",
        cgroupsPerQOS: false,
        enforceNodeAllocatable: [],
        containerRuntimeEndpoint: `unix://${this.containerd.socket}`,
        staticPodPath: this.manifests,
        fileCheckFrequency: "1s",
        failSwapOn: false,
        readOnlyPort: 0,
        address: this.nodeIp,
        healthzBindAddress: "127.0.0.1",
        localStorageCapacityIsolation: false,
        makeIPTablesUtilChains: false,
        resolvConf: "",
        evictionHard: { "memory.available": "1Mi" },
        imageGCHighThresholdPercent: 100,
        imageGCLowThresholdPercent: 99,
      }),
    );
    const mounts = [
      `mount --make-rprivate /`,
      `mount --bind ${this.dir}/var-lib /var/lib`,
      ...SHADOWED_SYSCTLS.map((s) =>
        `mount --bind ${this.dir}/sysctl/${s.replace("/", "_")} /proc/sys/${s}`
      ),
    ];
    await Deno.writeTextFile(
      `${this.dir}/run.sh`,
      `set -e\n${mounts.join("\n")}\nexec nsenter --net=${this.netns.path} ${this.bin} ` +
        `--config=${this.dir}/config.yaml --root-dir=${this.dir}/root ` +
        `--cert-dir=${this.dir}/pki --hostname-override=vpcni-node --node-ip=${this.nodeIp} ` +
        `--v=2 >>${this.log} 2>&1\n`,
    );
  }

  /** Starts the kubelet process and waits until its pod-resources socket answers. */
  async startProcess(): Promise<void> {
    this.#proc = new Deno.Command("unshare", {
      args: ["--mount", "--propagation", "private", "sh", `${this.dir}/run.sh`],
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    this.starts++;
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        await this.allocatable();
        await Deno.stat(`${this.devicePluginDir}/kubelet.sock`);
        return;
      } catch (e) {
        if (Date.now() > deadline) {
          throw new Error(`kubelet did not serve within 60 s (${e}): ${await this.logTail()}`);
        }
        const exited = await Promise.race([
          this.#proc.status,
          new Promise<undefined>((r) => setTimeout(() => r(undefined), 300)),
        ]);
        if (exited) throw new Error(`kubelet exited ${exited.code}: ${await this.logTail()}`);
      }
    }
  }

  /** Stops the kubelet process (SIGTERM, then SIGKILL), leaving its files. */
  async stopProcess(): Promise<void> {
    this.#client?.close();
    this.#client = undefined;
    const p = this.#proc;
    if (!p) return;
    this.#proc = undefined;
    await stopChild(p);
  }

  #pr(): UnixGrpcClient {
    return this.#client ??= new UnixGrpcClient(this.podResourcesSocket);
  }

  /** `GetAllocatableResources`: the healthy devices of every registered resource. */
  async allocatable(): Promise<Map<string, string[]>> {
    const r = await this.#pr().unary(POD_RESOURCES.GetAllocatableResources, {}, 3000);
    const out = new Map<string, string[]>();
    for (const d of r.devices) {
      out.set(d.resourceName, [...(out.get(d.resourceName) ?? []), ...d.deviceIds]);
    }
    return out;
  }

  /** `List`: running pods with their devices. */
  listPods() {
    return this.#pr().unary(POD_RESOURCES.List, {}, 3000);
  }

  /**
   * Writes a static pod (busybox, sleeping) that asks for `resources` (limits). It shares
   * the node's network unless `podNetwork` (then the runtime runs the CNI plugin for it).
   * The kubelet names it `<name>-<node name>`.
   */
  async addStaticPod(
    name: string,
    resources: Record<string, number>,
    annotations: Record<string, string> = {},
    podNetwork = false,
  ) {
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace: "default", annotations },
      spec: {
        hostNetwork: !podNetwork,
        containers: [{
          name: "app",
          image: this.containerd.image.name,
          imagePullPolicy: "Never",
          command: ["/bin/sleep", "3600"],
          resources: {
            limits: Object.fromEntries(Object.entries(resources).map(([k, v]) => [k, String(v)])),
          },
        }],
      },
    };
    await Deno.writeTextFile(`${this.manifests}/${name}.json`, JSON.stringify(pod));
  }

  /** Removes a static pod's manifest (the kubelet then stops the pod). */
  async removeStaticPod(name: string) {
    await Deno.remove(`${this.manifests}/${name}.json`);
  }

  /** The last lines of the kubelet's log. */
  async logTail(lines = 30): Promise<string> {
    const t = await Deno.readTextFile(this.log).catch(() => "");
    return t.split("\n").slice(-lines).join("\n");
  }

  /**
   * Stops the kubelet; when this helper made the node, also containerd, the netns and the
   * files. Returns problems found on the way.
   */
  async close(): Promise<string[]> {
    await this.stopProcess();
    if (!this.ownsContainerd) return [];
    const problems = await this.containerd.close();
    if (this.netns.name) await deleteNetns(this.netns.name);
    // The kubelet's mounts lived in its own mount namespace and went with it.
    await Deno.remove(this.dir, { recursive: true }).catch((e) => problems.push(String(e)));
    return problems;
  }
}
