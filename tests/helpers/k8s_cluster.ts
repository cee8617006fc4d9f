/**
 * A Kubernetes cluster of one or more worker nodes on the simulated VPC, for
 * `deno task test:k8s`: the world of k8s_world.ts (one instance and netns per node), each
 * node's namespaces and agents (k8s_lane_node.ts), fresh certificates (k8s_pki.ts), one
 * control plane on the first node (k8s_control_plane.ts), and the DNS add-on
 * (k8s_coredns.ts). {@linkcode LaneCluster.start} brings it up to "every node registered,
 * default ServiceAccount present"; a node turns Ready once a CNI conflist exists on it (that
 * is vpcni's DaemonSet's job). {@linkcode LaneCluster.close} takes everything down, also
 * after a failed start, and reports what it could not remove.
 *
 * @module
 */
import { buildOciImage } from "../../tools/runtime/oci_image.ts";
import { type LaneBinaries, laneBinaries } from "./k8s_bins.ts";
import {
  APISERVER_PORT,
  KUBE_DNS_IP,
  KUBERNETES_SERVICE_IP,
  startApiserver,
  startControllers,
  startEtcd,
} from "./k8s_control_plane.ts";
import { buildCorednsImage, corednsObjects } from "./k8s_coredns.ts";
import { LaneNode } from "./k8s_lane_node.ts";
import type { NodeNamespace } from "./k8s_nodens.ts";
import { tail } from "./k8s_node_agents.ts";
import { makePki, type Pki } from "./k8s_pki.ts";
import { type LaneWorld, startWorld } from "./k8s_world.ts";

/** The nodes' names in the cluster (also their host names), first node first. */
export const NODE_NAMES = ["lane-node", "lane-node-2", "lane-node-3"];

/** The first node's name: it also runs the control plane. */
export const NODE_NAME = NODE_NAMES[0];

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
  /** Every worker node, first one first. */
  readonly nodes: LaneNode[];
  readonly pki: Pki;
  readonly bins: LaneBinaries;
  /** Milliseconds from the start call to "every node registered, default ServiceAccount". */
  bringUpMs = 0;

  private constructor(init: {
    tag: string;
    dir: string;
    world: LaneWorld;
    nodes: LaneNode[];
    pki: Pki;
    bins: LaneBinaries;
  }) {
    this.tag = init.tag;
    this.dir = init.dir;
    this.world = init.world;
    this.nodes = init.nodes;
    this.pki = init.pki;
    this.bins = init.bins;
  }

  /** The first node's namespaces: where the control plane runs and kubectl is run from. */
  get node(): NodeNamespace {
    return this.nodes[0].ns;
  }

  /** The admin kubeconfig (names the API server at 127.0.0.1, inside the first node). */
  get adminKubeconfig(): string {
    return this.pki.kubeconfig.admin;
  }

  /**
   * Brings the cluster up with `nodes` worker nodes (default 1, at most
   * {@linkcode NODE_NAMES}'s length); `images` are extra OCI archives to import into every
   * node's containerd (the vpcni image). The DNS add-on is applied; its pod starts once a
   * CNI is installed. Throws with the failing component's log, after tearing down.
   */
  static async start(
    o: { tag: string; images: string[]; nodes?: number },
  ): Promise<LaneCluster> {
    const started = performance.now();
    const count = o.nodes ?? 1;
    if (!Number.isInteger(count) || count < 1 || count > NODE_NAMES.length) {
      throw new Error(`nodes must be an integer from 1 to ${NODE_NAMES.length}, not ${o.nodes}`);
    }
    const bins = laneBinaries();
    const dir = await Deno.makeTempDir({ prefix: `${o.tag}-` });
    let world: LaneWorld | undefined;
    const nodes: LaneNode[] = [];
    let cluster: LaneCluster | undefined;
    try {
      world = await startWorld(o.tag, count);
      for (const [i, w] of world.nodes.entries()) {
        nodes.push(
          await LaneNode.create({
            tag: o.tag,
            dir: `${dir}/node${i === 0 ? "" : i + 1}`,
            name: NODE_NAMES[i],
            world: w,
            bins,
          }),
        );
      }
      const first = nodes[0];
      const [pki, busybox, coredns] = await Promise.all([
        makePki(bins.openssl, `${dir}/pki`, {
          nodeNames: nodes.map((n) => n.name),
          server: `https://127.0.0.1:${APISERVER_PORT}`,
          nodeServer: `https://${first.ip}:${APISERVER_PORT}`,
          sans: [
            "IP:127.0.0.1",
            `IP:${first.ip}`,
            `IP:${KUBERNETES_SERVICE_IP}`,
            "DNS:localhost",
            "DNS:kubernetes",
            "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc",
            "DNS:kubernetes.default.svc.cluster.local",
          ],
        }),
        buildOciImage(`${dir}/busybox.oci.tar`, { name: BUSYBOX_IMAGE, busybox: bins.busybox }),
        buildCorednsImage(`${dir}/coredns.oci.tar`, bins.coredns),
      ]);
      cluster = new LaneCluster({ tag: o.tag, dir, world, nodes, pki, bins });
      const spec = { nodeIp: first.ip, pki, bins };
      const agentSpecs = nodes.map((n) =>
        n.agentSpec({ sandboxImage: BUSYBOX_IMAGE, clusterDns: KUBE_DNS_IP, pki, bins })
      );
      const images = [busybox.path, coredns.path, ...o.images];
      await startEtcd(first.ns, bins);
      await startApiserver(first.ns, spec);
      await Promise.all([
        ...nodes.map((n, i) => n.startRuntime(agentSpecs[i], images)),
        cluster.#waitApiserver(60_000),
      ]);
      await startControllers(first.ns, spec);
      for (const [i, n] of nodes.entries()) await n.startAgents(agentSpecs[i]);
      await cluster.#waitFor(
        "every node to register and the default ServiceAccount",
        90_000,
        async () => {
          const n = await cluster!.kubectl(["get", "nodes", "-o", "name"]);
          const sa = await cluster!.kubectl(["get", "serviceaccount", "default", "-o", "name"]);
          const names = n.stdout.split("\n").filter((l) => l.trim());
          return n.code === 0 && sa.code === 0 && names.length === nodes.length;
        },
      );
      await cluster.kubectlOk(
        ["apply", "-f", "-"],
        JSON.stringify({ apiVersion: "v1", kind: "List", items: corednsObjects() }),
      );
      cluster.bringUpMs = performance.now() - started;
      return cluster;
    } catch (e) {
      const logs = (await Promise.all(nodes.map((n) => LaneCluster.#logTails(n)))).join("\n");
      if (cluster) await cluster.close();
      else {
        for (const n of nodes) await n.close();
        await world?.close();
        await Deno.remove(dir, { recursive: true }).catch(() => {});
      }
      throw new Error(`${(e as Error).message}\n${logs}`);
    }
  }

  static async #logTails(node: LaneNode): Promise<string> {
    const out: string[] = [];
    for (const c of ["etcd", "kube-apiserver", "containerd", "kubelet", "kube-proxy"]) {
      const t = await tail(`${node.ns.dir}/${c}.log`, 12);
      if (t.trim()) out.push(`--- ${node.name}: ${c}.log (tail)\n${t}`);
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
   * Takes everything down: every kubelet first (so nothing restarts), then each node, the
   * first (with the control plane) last: its processes, its containers with their netns and
   * veths, its mount namespace with all its mounts, its pod cgroups; then the node netns,
   * the fabric and the simulator. Returns what it could not remove.
   */
  async close(): Promise<string[]> {
    const problems: string[] = [];
    for (const n of this.nodes) await n.stopKubelet();
    for (const n of [...this.nodes].reverse()) problems.push(...await n.close());
    await this.world.close().catch((e) => problems.push(`world: ${(e as Error).message}`));
    await Deno.remove(this.dir, { recursive: true }).catch((e) =>
      problems.push(`rm ${this.dir}: ${(e as Error).message}`)
    );
    return problems;
  }
}
