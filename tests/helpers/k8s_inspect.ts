/**
 * What the Kubernetes lane's tests read from the cluster and its nodes: pods, their
 * readiness and their node, kubectl apply/exec, each node's rules, routes, links and vpcni
 * checkpoint (for the checks that nothing of a pod is left behind), and the fabric's packet
 * counters (for the checks that traffic between nodes crossed the VPC).
 *
 * @module
 */
import { readCheckpoint } from "../../ipam/checkpoint.ts";
import type { LaneCluster } from "./k8s_cluster.ts";
import type { LaneNode } from "./k8s_lane_node.ts";
import { nodeObjectsNaming } from "./node_objects.ts";

/** The parts of a Pod the lane reads. */
export interface PodJson {
  metadata: { name: string; namespace: string; labels?: Record<string, string> };
  spec: { nodeName?: string; hostNetwork?: boolean };
  status: {
    phase: string;
    podIP?: string;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
}

/** True when the pod's Ready condition is True. */
export function isReady(p: PodJson): boolean {
  return p.status.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

/** True when `ip` lies in `cidr`. */
export function inCidr(ip: string, cidr: string): boolean {
  const toInt = (a: string) => a.split(".").reduce((n, o) => n * 256 + Number(o), 0);
  const [base, len] = cidr.split("/");
  const size = 2 ** (32 - Number(len));
  return Math.floor(toInt(ip) / size) === Math.floor(toInt(base) / size);
}

/** The pods matching a label selector. */
export async function pods(c: LaneCluster, selector: string, ns = "default"): Promise<PodJson[]> {
  const list = await c.getJson<{ items: PodJson[] }>(["pods", "-n", ns, "-l", selector]);
  return list.items;
}

/** Waits until `selector` has exactly `n` pods, all Ready; returns them. */
export async function readyPods(
  c: LaneCluster,
  selector: string,
  n: number,
  timeoutMs = 120_000,
  ns = "default",
): Promise<PodJson[]> {
  let last: PodJson[] = [];
  try {
    await c.waitFor(`${n} Ready pods with ${selector}`, timeoutMs, async () => {
      last = await pods(c, selector, ns);
      return last.length === n && last.every(isReady);
    });
  } catch (e) {
    const states = last.map((p) => `${p.metadata.name}: ${p.status.phase} ${p.status.podIP ?? ""}`);
    const events = await c.kubectl(["get", "events", "-A", "--sort-by=.lastTimestamp"]);
    const daemon = await c.kubectl([
      "-n",
      "kube-system",
      "logs",
      "-l",
      "app.kubernetes.io/name=vpcni",
      "--all-containers",
      "--tail=20",
    ]);
    throw new Error(
      `${(e as Error).message}\n${states.join("\n")}\nevents:\n${
        events.stdout.split("\n").slice(-25).join("\n")
      }\nvpcni logs:\n${daemon.stdout}${daemon.stderr}`,
    );
  }
  return last;
}

/** `kubectl apply` of objects, as one List. */
export async function apply(c: LaneCluster, objects: Record<string, unknown>[]): Promise<void> {
  await c.kubectlOk(
    ["apply", "-f", "-"],
    JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
  );
}

/** Runs a shell line in a pod's container (kubectl exec); returns stdout and the exit code. */
export async function execIn(c: LaneCluster, pod: string, script: string) {
  return await c.kubectl(["exec", pod, "--", "/bin/sh", "-c", script]);
}

/** Lines of the node's rules, routes (all tables) and permanent neighbours naming `ip`. */
export function nodeObjectsFor(node: LaneNode, ip: string): Promise<string[]> {
  return nodeObjectsNaming(ip, async (args) => (await node.ns.run(["ip", ...args])).stdout);
}

/** The node's host-side pod links (the conflist's hostVethPrefix is vpcni's default `vpc`). */
export async function podLinks(node: LaneNode): Promise<string[]> {
  const r = await node.ns.run(["ip", "-j", "link", "show"]);
  return (JSON.parse(r.stdout) as { ifname: string }[]).map((l) => l.ifname)
    .filter((n) => n.startsWith("vpc"));
}

/** The addresses the node's daemon's checkpoint (its /var/lib/vpcni) holds for pods. */
export async function checkpointIps(node: LaneNode): Promise<string[]> {
  const cp = await readCheckpoint(`${node.ns.dir}/overlay_var_lib/upper/vpcni`);
  return cp?.allocations.map((a) => a.ip) ?? [];
}

/** The node a pod runs on; throws when it is not one of the cluster's. */
export function nodeOf(c: LaneCluster, p: PodJson): LaneNode {
  const n = c.nodes.find((x) => x.name === p.spec.nodeName);
  if (!n) throw new Error(`${p.metadata.name} is on ${p.spec.nodeName ?? "no node"}`);
  return n;
}

/** Pods of every namespace on `node` that have a pod network (not hostNetwork) and run. */
export async function podNetworkPodsOn(c: LaneCluster, node: LaneNode): Promise<PodJson[]> {
  const list = await c.getJson<{ items: PodJson[] }>([
    "pods",
    "-A",
    `--field-selector=spec.nodeName=${node.name}`,
  ]);
  return list.items.filter((p) =>
    !p.spec.hostNetwork && p.status.phase !== "Succeeded" && p.status.phase !== "Failed"
  );
}

/** Packets the fabric (the VPC) has delivered to an ENI so far. */
export async function packetsIntoEni(c: LaneCluster, eniId: string): Promise<number> {
  const fabIf = c.world.fabric.fabricInterfaceOf(eniId);
  if (!fabIf) throw new Error(`the fabric has no link for ${eniId}`);
  const r = await new Deno.Command("ip", {
    args: ["-n", c.world.fabric.netns, "-j", "-s", "link", "show", fabIf],
    stdout: "piped",
  }).output();
  const [link] = JSON.parse(new TextDecoder().decode(r.stdout)) as {
    stats64: { tx: { packets: number } };
  }[];
  return link.stats64.tx.packets;
}

/** GET of the node's vpcni daemon's introspection endpoint (127.0.0.1:61679 on the node). */
export async function daemonGet<T>(c: LaneCluster, node: LaneNode, path: string): Promise<T> {
  const r = await node.ns.run([
    c.bins.busybox,
    "sh",
    "-c",
    `printf 'GET ${path} HTTP/1.0\\r\\n\\r\\n' | ${c.bins.busybox} nc 127.0.0.1 61679`,
  ]);
  const body = r.stdout.slice(r.stdout.indexOf("\r\n\r\n") + 4);
  if (!/^HTTP\/1\.[01] 200/.test(r.stdout)) {
    throw new Error(`GET ${path} on ${node.name}'s daemon: ${r.stdout}${r.stderr}`);
  }
  return JSON.parse(body) as T;
}
