/**
 * A one-node Kubernetes cluster on the simulated VPC, for `deno task test:k8s`: the world
 * of k8s_world.ts, the node's mount namespace (k8s_nodens.ts), fresh certificates
 * (k8s_pki.ts), the control plane (k8s_control_plane.ts) and the node's agents
 * (k8s_node_agents.ts). {@linkcode LaneCluster.start} brings it up to "node registered,
 * default ServiceAccount present"; the node turns Ready once a CNI conflist exists (that is
 * vpcni's DaemonSet's job). {@linkcode LaneCluster.close} takes everything down, also after
 * a failed start, and reports what it could not remove.
 *
 * @module
 */
import { buildOciImage } from "../../tools/runtime/oci_image.ts";
import { type LaneBinaries, laneBinaries, NODE_CNI_PLUGINS } from "./k8s_bins.ts";
import {
  APISERVER_PORT,
  KUBERNETES_SERVICE_IP,
  startApiserver,
  startControllers,
  startEtcd,
} from "./k8s_control_plane.ts";
import { NodeNamespace } from "./k8s_nodens.ts";
import {
  importImage,
  makeCgroupRoot,
  pidsInCgroupRoot,
  removeCgroupRoot,
  startContainerd,
  startKubelet,
  startKubeProxy,
  tail,
} from "./k8s_node_agents.ts";
import { makePki, type Pki } from "./k8s_pki.ts";
import { type LaneWorld, startWorld } from "./k8s_world.ts";

/** The node's name in the cluster. */
export const NODE_NAME = "lane-node";

/** The busybox image (sandbox and workloads), built locally by tools/runtime/oci_image.ts. */
export const BUSYBOX_IMAGE = "docker.io/vpcni/busybox:k8s-lane";

/** One kubectl run. */
export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The running cluster. */
export class LaneCluster {
  readonly tag: string;
  readonly dir: string;
  readonly world: LaneWorld;
  readonly node: NodeNamespace;
  readonly pki: Pki;
  readonly bins: LaneBinaries;
  readonly cgroupRoot: string;
  /** Milliseconds from the start call to "node registered, default ServiceAccount". */
  bringUpMs = 0;

  private constructor(init: {
    tag: string;
    dir: string;
    world: LaneWorld;
    node: NodeNamespace;
    pki: Pki;
    bins: LaneBinaries;
  }) {
    this.tag = init.tag;
    this.dir = init.dir;
    this.world = init.world;
    this.node = init.node;
    this.pki = init.pki;
    this.bins = init.bins;
    this.cgroupRoot = `/${init.tag}`;
  }

  /**
   * Brings the cluster up; `images` are extra OCI archives to import into containerd (the
   * vpcni image). Throws with the failing component's log, after tearing down.
   */
  static async start(o: { tag: string; images: string[] }): Promise<LaneCluster> {
    const started = performance.now();
    const bins = laneBinaries();
    const dir = await Deno.makeTempDir({ prefix: `${o.tag}-` });
    let world: LaneWorld | undefined;
    let node: NodeNamespace | undefined;
    let cluster: LaneCluster | undefined;
    try {
      world = await startWorld(o.tag);
      node = await NodeNamespace.create({
        dir: `${dir}/node`,
        netnsPath: world.nodePath,
        unshare: bins.unshare,
        nsenter: bins.nsenter,
      });
      const server = `https://127.0.0.1:${APISERVER_PORT}`;
      const [pki, image] = await Promise.all([
        makePki(bins.openssl, `${dir}/pki`, {
          nodeName: NODE_NAME,
          server,
          sans: [
            "IP:127.0.0.1",
            `IP:${world.nodeIp}`,
            `IP:${KUBERNETES_SERVICE_IP}`,
            "DNS:localhost",
            "DNS:kubernetes",
            "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc",
            "DNS:kubernetes.default.svc.cluster.local",
          ],
        }),
        buildOciImage(`${dir}/busybox.oci.tar`, { name: BUSYBOX_IMAGE, busybox: bins.busybox }),
      ]);
      cluster = new LaneCluster({ tag: o.tag, dir, world, node, pki, bins });
      const spec = { nodeIp: world.nodeIp, pki, bins };
      const agentSpec = {
        nodeName: NODE_NAME,
        nodeIp: world.nodeIp,
        cgroupRoot: cluster.cgroupRoot,
        sandboxImage: BUSYBOX_IMAGE,
        pki,
        bins,
      };
      await makeCgroupRoot(cluster.cgroupRoot);
      // A node carries the reference plugins containerd 1.6 needs (loopback) and those the
      // example chains after vpcni, as a distribution's CNI plugins package would.
      const cniBin = `${node.dir}/overlay_opt/upper/cni/bin`;
      await Deno.mkdir(cniBin, { recursive: true });
      for (const p of NODE_CNI_PLUGINS) await Deno.copyFile(bins[p], `${cniBin}/${p}`);
      await startEtcd(node, bins);
      await startApiserver(node, spec);
      await Promise.all([
        (async () => {
          await startContainerd(node!, agentSpec);
          for (const a of [image.path, ...o.images]) await importImage(node!, bins, a);
        })(),
        cluster.#waitApiserver(60_000),
      ]);
      await startControllers(node, spec);
      await startKubelet(node, agentSpec);
      await startKubeProxy(node, agentSpec);
      await cluster.#waitFor(
        "the node to register and the default ServiceAccount",
        90_000,
        async () => {
          const n = await cluster!.kubectl(["get", "node", NODE_NAME, "-o", "name"]);
          const sa = await cluster!.kubectl(["get", "serviceaccount", "default", "-o", "name"]);
          return n.code === 0 && sa.code === 0;
        },
      );
      cluster.bringUpMs = performance.now() - started;
      return cluster;
    } catch (e) {
      const logs = node ? await LaneCluster.#logTails(node.dir) : "";
      if (cluster) await cluster.close();
      else {
        await node?.close();
        await world?.close();
        await Deno.remove(dir, { recursive: true }).catch(() => {});
      }
      throw new Error(`${(e as Error).message}\n${logs}`);
    }
  }

  static async #logTails(dir: string): Promise<string> {
    const out: string[] = [];
    for (const c of ["etcd", "kube-apiserver", "containerd", "kubelet", "kube-proxy"]) {
      const t = await tail(`${dir}/${c}.log`, 12);
      if (t.trim()) out.push(`--- ${c}.log (tail)\n${t}`);
    }
    return out.join("\n");
  }

  async #waitApiserver(timeoutMs: number): Promise<void> {
    await this.#waitFor("the API server's /readyz", timeoutMs, async () => {
      if (!(await this.node.running("kube-apiserver"))) {
        throw new Error("kube-apiserver exited");
      }
      return (await this.kubectl(["get", "--raw", "/readyz"])).code === 0;
    });
  }

  async #waitFor(what: string, timeoutMs: number, ok: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (await ok()) return;
      await sleep(250);
    }
    throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
  }

  /** Runs kubectl as the cluster admin, inside the node. */
  kubectl(args: string[], stdin?: string): Promise<KubectlResult> {
    return this.node.run(
      [this.bins.kubectl, `--kubeconfig=${this.pki.kubeconfig.admin}`, ...args],
      stdin,
    );
  }

  /** Runs kubectl and throws with its stderr on failure; returns stdout. */
  async kubectlOk(args: string[], stdin?: string): Promise<string> {
    const r = await this.kubectl(args, stdin);
    if (r.code !== 0) {
      throw new Error(`kubectl ${args.join(" ")} exited ${r.code}: ${r.stderr.trim()}`);
    }
    return r.stdout;
  }

  /** kubectl get … -o json, parsed. */
  async getJson<T>(args: string[]): Promise<T> {
    return JSON.parse(await this.kubectlOk(["get", ...args, "-o", "json"])) as T;
  }

  /** Polls `ok` every 500 ms until it returns true; throws naming `what` on timeout. */
  waitFor(what: string, timeoutMs: number, ok: () => Promise<boolean>): Promise<void> {
    return this.#waitFor(what, timeoutMs, ok);
  }

  /**
   * Takes everything down: kubelet first (so nothing restarts), then every process in the
   * node (agents, control plane, shims, containers; the pods' netns and veths go with
   * them), the node's mount namespace with all its mounts, the pod cgroups, the node netns,
   * the fabric and the simulator. Returns what it could not remove.
   */
  async close(): Promise<string[]> {
    const problems: string[] = [];
    await this.node.stop("kubelet").catch(() => {});
    await this.node.close().catch((e) => problems.push(`node: ${(e as Error).message}`));
    // Containers live in mount namespaces of their own: find them by their cgroups.
    for (let round = 0; round < 40; round++) {
      const alive = [
        ...await pidsInCgroupRoot(this.cgroupRoot),
        ...await this.node.pidsInside().catch(() => []),
      ];
      if (alive.length === 0) break;
      for (const pid of alive) {
        try {
          Deno.kill(pid, "SIGKILL");
        } catch { /* gone */ }
      }
      await sleep(250);
    }
    const left = await this.node.pidsInside().catch(() => []);
    if (left.length > 0) problems.push(`processes still in the node: ${left.join(" ")}`);
    const containers = await pidsInCgroupRoot(this.cgroupRoot);
    if (containers.length > 0) problems.push(`containers still running: ${containers.join(" ")}`);
    problems.push(...(await removeCgroupRoot(this.cgroupRoot)).map((d) => `cgroup ${d} left`));
    await this.world.close().catch((e) => problems.push(`world: ${(e as Error).message}`));
    await Deno.remove(this.dir, { recursive: true }).catch((e) =>
      problems.push(`rm ${this.dir}: ${(e as Error).message}`)
    );
    return problems;
  }
}
