/**
 * One worker node of the lane: its namespaces (k8s_nodens.ts) on its instance's netns, the
 * reference CNI plugins a node carries, its pod cgroup root, containerd with the lane's
 * images, and kubelet and kube-proxy (k8s_node_agents.ts). {@linkcode LaneNode.close} takes
 * all of it down, containers included, and says what it could not remove.
 *
 * @module
 */
import { type LaneBinaries, NODE_CNI_PLUGINS } from "./k8s_bins.ts";
import { NodeNamespace } from "./k8s_nodens.ts";
import {
  importImage,
  makeCgroupRoot,
  type NodeAgentSpec,
  pidsInCgroupRoot,
  removeCgroupRoot,
  startContainerd,
  startKubelet,
  startKubeProxy,
} from "./k8s_node_agents.ts";
import type { WorldNode } from "./k8s_world.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A node of the lane and where it lives. */
export class LaneNode {
  /** The node's name in the cluster, also its host name. */
  readonly name: string;
  /** The node's primary address (InternalIP). */
  readonly ip: string;
  /** The simulated EC2 instance the node is. */
  readonly instanceId: string;
  /** The node's namespaces and the processes started in them. */
  readonly ns: NodeNamespace;
  /** cgroup root of the node's pods (`/<lane tag>-<node name>`). */
  readonly cgroupRoot: string;
  readonly #bins: LaneBinaries;

  private constructor(o: {
    name: string;
    world: WorldNode;
    ns: NodeNamespace;
    cgroupRoot: string;
    bins: LaneBinaries;
  }) {
    this.name = o.name;
    this.ip = o.world.ip;
    this.instanceId = o.world.instanceId;
    this.ns = o.ns;
    this.cgroupRoot = o.cgroupRoot;
    this.#bins = o.bins;
  }

  /**
   * Makes the node's namespaces in `dir` (host name = `name`), its pod cgroup root and its
   * /opt/cni/bin with the reference plugins containerd 1.6 needs (loopback) and those the
   * example chains after vpcni, as a distribution's CNI plugins package would.
   */
  static async create(o: {
    tag: string;
    dir: string;
    name: string;
    world: WorldNode;
    bins: LaneBinaries;
  }): Promise<LaneNode> {
    const ns = await NodeNamespace.create({
      dir: o.dir,
      netnsPath: o.world.netnsPath,
      hostname: o.name,
      unshare: o.bins.unshare,
      nsenter: o.bins.nsenter,
    });
    const node = new LaneNode({ ...o, ns, cgroupRoot: `/${o.tag}-${o.name}` });
    try {
      await makeCgroupRoot(node.cgroupRoot);
      const cniBin = `${ns.dir}/overlay_opt/upper/cni/bin`;
      await Deno.mkdir(cniBin, { recursive: true });
      for (const p of NODE_CNI_PLUGINS) await Deno.copyFile(o.bins[p], `${cniBin}/${p}`);
    } catch (e) {
      await node.close();
      throw e;
    }
    return node;
  }

  /** What the node's agents are started with. */
  agentSpec(common: Omit<NodeAgentSpec, "nodeName" | "nodeIp" | "cgroupRoot">): NodeAgentSpec {
    return { ...common, nodeName: this.name, nodeIp: this.ip, cgroupRoot: this.cgroupRoot };
  }

  /** Starts containerd and imports the OCI archives `images` into its `k8s.io` namespace. */
  async startRuntime(spec: NodeAgentSpec, images: string[]): Promise<void> {
    await startContainerd(this.ns, spec);
    for (const a of images) await importImage(this.ns, this.#bins, a);
  }

  /** Starts kubelet and kube-proxy (after the runtime, with the API server answering). */
  async startAgents(spec: NodeAgentSpec): Promise<void> {
    await startKubelet(this.ns, spec);
    await startKubeProxy(this.ns, spec);
  }

  /** Stops kubelet, so that nothing of the node restarts while the rest goes down. */
  async stopKubelet(): Promise<void> {
    await this.ns.stop("kubelet").catch(() => {});
  }

  /**
   * Takes the node down: every process inside it (agents, shims, and what else runs there),
   * then the containers, which live in mount namespaces of their own and are found by their
   * cgroups (the pods' netns and veths go with them), then the pod cgroup root. The node's
   * mounts go with its mount namespace. Returns what it could not remove.
   */
  async close(): Promise<string[]> {
    const problems: string[] = [];
    await this.stopKubelet();
    await this.ns.close().catch((e) => problems.push(`${this.name}: ${(e as Error).message}`));
    // Done after two empty looks in a row: a process forked just as its parent was killed
    // can show up after a look that found none.
    for (let round = 0, quiet = 0; round < 40 && quiet < 2; round++) {
      const alive = [
        ...await pidsInCgroupRoot(this.cgroupRoot),
        ...await this.ns.pidsInside().catch(() => []),
      ];
      quiet = alive.length === 0 ? quiet + 1 : 0;
      for (const pid of alive) {
        try {
          Deno.kill(pid, "SIGKILL");
        } catch { /* gone */ }
      }
      await sleep(250);
    }
    const left = await this.ns.pidsInside().catch(() => []);
    if (left.length > 0) problems.push(`processes still in ${this.name}: ${left.join(" ")}`);
    const containers = await pidsInCgroupRoot(this.cgroupRoot);
    if (containers.length > 0) {
      problems.push(`containers of ${this.name} still running: ${containers.join(" ")}`);
    }
    problems.push(...(await removeCgroupRoot(this.cgroupRoot)).map((d) => `cgroup ${d} left`));
    return problems;
  }
}
